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
