"""What `pip install .` ships and needs: metadata, runtime imports, the built wheel."""
import configparser
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cfg():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "setup.cfg"))
    return cfg


def _reqs(text):
    return {line.split(";")[0].split(">")[0].split("=")[0].split("[")[0].strip().lower()
            for line in text.strip().splitlines() if line.strip()}


#: Import names whose distribution is called otherwise.
_DISTRIBUTION = {"sklearn": "scikit-learn", "distributed": "dask"}


def test_metadata_dependencies_and_license():
    cfg = _cfg()
    runtime = _reqs(cfg["options"]["install_requires"])
    dev = _reqs(cfg["options.extras_require"]["dev"])
    assert {"numpy", "scipy", "numba", "matplotlib", "tqdm", "threadpoolctl"} <= runtime
    assert "sympy" not in runtime and "sympy" in dev        # only theory/*.py and tests use it
    assert {"pytest", "nbclient", "nbconvert", "ipykernel"} <= dev
    assert cfg["metadata"]["license"] == "BSD-3-Clause"
    assert os.path.isfile(os.path.join(ROOT, cfg["metadata"]["license_files"].strip()))


def test_numba_pinned_below_an_untested_release_and_the_linter_configured():
    """numba's cache index is patched (``_numba_cache.lock_cache``): an upper bound keeps a
    release it was not tested with out; ruff (the dev extra) reads pyproject.toml."""
    cfg = _cfg()
    numba = [r for r in cfg["options"]["install_requires"].splitlines() if "numba" in r]
    assert numba and "<" in numba[0], numba
    assert "ruff" in _reqs(cfg["options.extras_require"]["dev"])
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    assert "[tool.ruff]" in text and "line-length = 100" in text


def test_runtime_does_not_import_sympy(tmp_path):
    code = ("import sys, linearnets as ln\n"
            "ln.mode_strength([0.0, 1.0], 1.0, 1e-3, depth=3)\n"
            "assert 'sympy' not in sys.modules, 'sympy imported at run time'\n")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    for root, _, files in os.walk(os.path.join(ROOT, "linearnets")):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    src = f.read()
                assert "import sympy" not in src and "from sympy" not in src, name


@pytest.mark.once        # a build: numpy's CPU dispatch cannot change it (.ci/run runs it once)
def test_wheel_has_the_package_and_no_compiled_cache(tmp_path):
    pytest.importorskip("setuptools")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True)
    if files.returncode != 0:
        pytest.skip("not a git checkout")
    src = tmp_path / "src"
    for rel in files.stdout.splitlines():
        if os.path.isfile(os.path.join(ROOT, rel)):
            os.makedirs(src / os.path.dirname(rel), exist_ok=True)
            shutil.copy2(os.path.join(ROOT, rel), src / rel)
    out = tmp_path / "wheel"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--no-index", "-q", "-w", str(out), str(src)],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and "bdist_wheel" in proc.stderr:
        pytest.skip("this setuptools cannot build wheels without the 'wheel' package")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = out.glob("linearnets-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "linearnets/__init__.py" in names and "linearnets/_numba_cache.py" in names
    assert "linearnets/sim/models/_linear_kernels.py" in names and "linearnets/theory/matching.py" in names
    assert "linearnets/compare/registry.py" in names and "linearnets/_version.py" in names
    # the test fixtures (the sweep's self-killing worker among them) stay out of the wheel
    assert not [n for n in names if n.startswith("tests/") or "toy" in n or "fixtures" in n], names
    assert not [n for n in names if n.endswith((".nbi", ".nbc", ".pyc"))]
    assert any(n.endswith(".dist-info/LICENSE") or "/licenses/LICENSE" in n for n in names), names


def test_every_runtime_import_is_declared():
    """Every third-party module the package imports, anywhere, is a dependency or in an extra
    (tomli only where Python < 3.11 lacks tomllib)."""
    import ast
    cfg = _cfg()
    declared = _reqs(cfg["options"]["install_requires"])
    for extra in cfg["options.extras_require"]:
        declared |= _reqs(cfg["options.extras_require"][extra])
    imported = set()
    for root, _, files in os.walk(os.path.join(ROOT, "linearnets")):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    tree = ast.parse(f.read())
                for node in ast.walk(tree):
                    if isinstance(node, ast.Import):
                        imported |= {a.name.split(".")[0] for a in node.names}
                    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                        imported.add(node.module.split(".")[0])
    third_party = {m for m in imported if m not in sys.stdlib_module_names and m != "linearnets"}
    assert {"numpy", "numba", "threadpoolctl", "tomli", "pandas"} <= third_party
    missing = {m for m in third_party if _DISTRIBUTION.get(m, m) not in declared}
    assert not missing, missing
    tomli = [r for r in cfg["options"]["install_requires"].splitlines() if r.strip().startswith("tomli")]
    assert tomli and 'python_version < "3.11"' in tomli[0]


def test_one_version_from_the_metadata_or_the_source_tree(monkeypatch):
    import importlib.metadata
    import linearnets
    from linearnets import _version
    version = _cfg()["metadata"]["version"]
    assert linearnets.__version__ == version
    # no second copy of the number in the package
    for root, _, files in os.walk(os.path.join(ROOT, "linearnets")):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    assert f'"{version}"' not in f.read(), name
    # a source tree without an install reads setup.cfg beside the package

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(_version.metadata, "version", not_installed)
    assert _version._version() == version


def test_sweep_without_pandas_says_which_extra(monkeypatch, tmp_path):
    import linearnets as ln
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"pandas.*linearnets\[data\]"):
        ln.sweep(lambda x: {"y": x}, {"x": [1.0]}, store=str(tmp_path / "s.sqlite"), jobs=0, progress=False)
