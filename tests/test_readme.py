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


#: The repository's folders whose files name each other by path (``docs/methods.md``,
#: ``benchmarks/studies/NAME.py``, ``tests/sim/test_flow.py``): every such path must exist, so
#: that a moved file takes its references with it.  (``theory/X.py`` in ``theory/*.md`` names
#: the package's module, so ``theory/`` paths are left out.)
_NAMED_PATH = re.compile(r"(?<![\w/.])((?:docs|benchmarks|notebooks|tests|experiments)/[\w./-]+"
                         r"\.(?:md|py|ipynb|sh|toml|csv|npz))")


def test_every_path_named_in_the_sources_and_docs_exists():
    sources = [README, *(ROOT / "docs").rglob("*.md"), *(ROOT / "theory").glob("*.md"),
               *(ROOT / "experiments").rglob("*.md"), ROOT / "notebooks" / "build_notebooks.py"]
    for folder in ("linearnets", "benchmarks", "tests"):
        sources += (ROOT / folder).rglob("*.py")
    missing = sorted({f"{p.relative_to(ROOT)}: {ref}" for p in sources
                      for ref in _NAMED_PATH.findall(p.read_text(encoding="utf-8"))
                      if "NAME" not in ref and not (ROOT / ref).exists()})
    assert not missing, missing

def test_no_reference_to_a_design_file_outside_the_repository():
    """Docstrings point to docs/conventions.md, which ships with the package's sources."""
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "linearnets").rglob("*.py")
                 if "DESIGN.md" in p.read_text(encoding="utf-8")]
    assert not offenders
    assert (ROOT / "docs" / "conventions.md").is_file()


def _methods_table(text):
    """The method names of the first ``| method | when to use it |`` table of a page."""
    block = text[text.index("| method | when to use it |"):]
    rows = block.split("\n\n")[0].splitlines()[2:]
    return [re.match(r'\| `"(\w+)"`', r).group(1) for r in rows]


def test_methods_are_listed_once_and_agree():
    # the table lives in docs/methods.md; README names the same methods and points there
    table = _methods_table((ROOT / "docs" / "methods.md").read_text())
    assert len(table) == len(set(table)) >= 5
    text = README.read_text()
    section = text[text.index("## Methods"):text.index("## Documentation")]
    assert "| method |" not in section and "`docs/methods.md`" in section
    assert sorted(re.findall(r'`"(\w+)"`', section)) == sorted(table)


def test_the_kernel_cache_is_explained_in_one_page():
    pages = [README] + sorted((ROOT / "docs").glob("*.md"))
    where = [p.name for p in pages if "LINEARNETS_CACHE_DIR" in p.read_text() or "XDG_CACHE_HOME" in p.read_text()]
    assert where == ["first_run.md"]
    assert "`docs/first_run.md`" in README.read_text()


#: The papers whose theory the package implements (first author, year, a piece of the title).
PAPERS = [("Saxe", "2014", "Exact solutions to the nonlinear dynamics of learning"),
          ("Atanasov", "2022", "The Silent Alignment Effect"),
          ("Geiger", "2020", "Disentangling feature and lazy training"),
          ("Luo", "2021", "Phase Diagram for Two-layer ReLU Neural Networks"),
          ("Zhou", "2022", "Empirical Phase Diagram for Three-layer"),
          ("Domin", "2024", "From Lazy to Rich: Exact Learning Dynamics"),
          ("Kunin", "2024", "Get rich quick"),
          ("Woodworth", "2020", "Kernel and Rich Regimes in Overparametrized Models")]


def test_citing_lists_every_paper_in_readme_and_citation_cff():
    text = README.read_text()
    citing = text[text.index("## Citing"):text.index("## License")]
    items = re.findall(r"^- (.*?)(?=^- |^```|\Z)", citing, flags=re.S | re.M)
    bib = re.findall(r"^@\w+\{", citing, flags=re.M)
    cff = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    cff_titles = re.findall(r'^  - type: [\w-]+\n    title: "(.*)"', cff, flags=re.M)
    assert len(items) == len(bib) == len(cff_titles) == len(PAPERS)
    for (author, year, title), item, cff_title in zip(PAPERS, items, cff_titles):
        flat = " ".join(item.split())
        assert title in flat and year in flat and author[:4] in flat, flat
        assert title in cff_title, cff_title
        assert title in " ".join(citing[citing.index("```bibtex"):].replace("{", "").replace("}", "").split())
