"""The tour in README.md runs as written."""
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_tour_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README.md has no python block"
    for block in blocks:
        exec(compile(block, str(README), "exec"), {"__name__": "readme"})


def test_readme_has_the_two_setup_commands():
    text = README.read_text()
    assert "pip install . && python -m linearnets verify" in text
    assert 'pip install -e ".[dev]" && pytest' in text


ROOT = README.parent


def test_docs_python_blocks_run():
    """The runnable examples of the reference pages (other pages may show sketches)."""
    for name in ("conventions.md", "first_run.md", "methods.md", "benchmarks.md"):
        page = ROOT / "docs" / name
        for block in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S):
            exec(compile(block, str(page), "exec"), {"__name__": "docs"})


def test_readme_front_door():
    text = README.read_text()
    assert "python -m linearnets warmup" in text              # the first run compiles
    for paper in ("Silent Alignment Effect", "Disentangling feature and lazy training",
                  "Empirical Phase Diagram for Three-layer"):
        assert paper in text
    assert (ROOT / "LICENSE").is_file() and "BSD 3-Clause" in (ROOT / "LICENSE").read_text()
    # every page and file README points to exists
    for ref in set(re.findall(r"`((?:docs|benchmarks|notebooks|theory)/[\w./-]+\.(?:md|py|ipynb))`", text)):
        if "NAME" not in ref:                                  # `theory/NAME.md`: a pattern
            assert (ROOT / ref).exists(), ref


def test_no_reference_to_a_design_file_outside_the_repository():
    """Docstrings point to docs/conventions.md, which ships with the package's sources."""
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "linearnets").rglob("*.py")
                 if "DESIGN.md" in p.read_text(encoding="utf-8")]
    assert not offenders
    assert (ROOT / "docs" / "conventions.md").is_file()
