"""Execute every notebook top to bottom in smoke mode so that they cannot rot."""
import glob
import os

import nbformat
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))


def test_there_are_notebooks():
    # linear closed forms, silent alignment, depth; a nonlinear flow, lazy and rich, a phase diagram
    assert len(NOTEBOOKS) >= 6


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs(path, monkeypatch):
    from nbclient import NotebookClient

    monkeypatch.setenv("LINEARNETS_SMOKE", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("PYTHONPATH", ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "store notebooks without outputs"
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": ROOT}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors


def test_notebooks_are_built_from_the_script(tmp_path):
    """The stored notebooks are exactly what build_notebooks.py writes."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_notebooks", os.path.join(ROOT, "notebooks",
                                                                                  "build_notebooks.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.HERE = str(tmp_path)
    mod.main()
    assert sorted(p.name for p in tmp_path.glob("*.ipynb")) == [os.path.basename(p) for p in NOTEBOOKS]
    for path in NOTEBOOKS:
        fresh = nbformat.read(str(tmp_path / os.path.basename(path)), as_version=4)
        stored = nbformat.read(path, as_version=4)
        assert [c.source for c in fresh.cells] == [c.source for c in stored.cells]
