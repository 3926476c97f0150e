"""The package's import structure, read from the sources: no circles, no module importing the package itself."""
import os

import linearnets
from linearnets import _numba_cache

PACKAGE_DIR = os.path.dirname(os.path.abspath(linearnets.__file__))
INIT = os.path.join(PACKAGE_DIR, "__init__.py")



def _name(path):
    rel = os.path.relpath(path, PACKAGE_DIR)[:-3].replace(os.sep, ".")
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else ("" if rel == "__init__" else rel)


def _modules():
    for root, dirs, files in os.walk(PACKAGE_DIR):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        yield from (os.path.join(root, f) for f in sorted(files) if f.endswith(".py"))


def _graph():
    """``{module: {imported module}}`` over the package (names below it; "" is the package)."""
    return {_name(p): {_name(f) for f, _ in _numba_cache.package_imports(p)} - {_name(p)} for p in _modules()}


def _circles(graph):
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_reader_sees_relative_absolute_and_package_imports(tmp_path):
    pkg = tmp_path / "linearnets"
    (pkg / "sub").mkdir(parents=True)
    for f in ("__init__.py", "a.py", "sub/__init__.py", "sub/b.py", "sub/c.py"):
        (pkg / f).write_text("")
    (pkg / "sub" / "b.py").write_text(
        "from . import c, not_a_module\nfrom .. import a\nfrom ..a import thing\n"
        "def f():\n    import linearnets.sub.c\n    from linearnets import a\n")
    found = [(os.path.relpath(f, pkg), getattr(node, "level", 0)) for f, node in _numba_cache.package_imports(
        str(pkg / "sub" / "b.py"), str(pkg))]
    assert found == [("sub/c.py", 1), ("sub/__init__.py", 1), ("a.py", 2), ("a.py", 2),
                     ("sub/c.py", 0), ("a.py", 0)]
    assert _circles({"x": {"y"}, "y": {"z"}, "z": {"x"}, "w": {"x"}}) == [frozenset("xyz")]


def test_no_module_inside_the_package_imports_linearnets_itself():
    """Inside the package, imports are relative and name the submodule they need: never
    ``import linearnets``, ``from linearnets import ...`` or ``from .. import name`` of the package."""
    offenders = []
    for path in _modules():
        for target, node in _numba_cache.package_imports(path):
            if getattr(node, "level", 0) == 0 or (target == INIT and path != INIT):
                offenders.append(f"{os.path.relpath(path, PACKAGE_DIR)}:{node.lineno}")
    assert not offenders, offenders


def test_no_import_circle():
    assert not [sorted(c) for c in _circles(_graph())]


def test_compare_imports_run_one_way():
    """Topic modules -> common, registry, plotting -> theory / sim / regimes; nothing imports a topic
    but the package's table, and the registry knows no topic."""
    graph = _graph()
    topics = {"compare.modes", "compare.alignment", "compare.ntk", "compare.transfer", "compare.unwhitened",
              "compare.regimes"}
    assert topics <= set(graph)
    for mod, deps in graph.items():
        if mod != "compare":
            assert not (deps & topics), (mod, deps & topics)
    for low in ("compare.common", "compare.registry", "compare.plotting"):
        assert not {d for d in graph[low] if d.startswith("compare")} - {"compare.registry", "compare.plotting"}
    for mod in ("theory", "sim", "regimes", "sweep"):
        assert not {d for m, deps in graph.items() if m.startswith(mod) for d in deps if d.startswith("compare")}


# --- the public namespace ------------------------------------------------------------------
def test_all_lists_exactly_the_public_names():
    import types
    names = set(linearnets.__all__)
    assert len(names) == len(linearnets.__all__)
    public = {n for n, v in vars(linearnets).items() if not n.startswith("_") and not isinstance(v, types.ModuleType)}
    assert names == public | {"sweep"}, (names ^ (public | {"sweep"}))
    assert all(hasattr(linearnets, n) for n in names)
    # the subpackages are reachable as attributes but not star-exported (sweep is also the function)
    assert {"theory", "sim", "compare", "regimes", "data", "backend"}.isdisjoint(names)


def test_sweep_is_the_function_and_the_module_in_a_fresh_process(tmp_path):
    """``import linearnets as ln, linearnets.sweep``: ``ln.sweep(...)`` runs a sweep, and the
    module's functions (docs/sweeps.md) are ``ln.sweep.stream`` and the rest."""
    import subprocess
    import sys
    code = ("import inspect, linearnets as ln, linearnets.sweep\n"
            "from linearnets.sweep import sweep, stream\n"
            "assert ln.sweep is linearnets.sweep and callable(ln.sweep)\n"
            "assert ln.sweep.stream is stream and ln.sweep.sweep is sweep\n"
            "assert list(inspect.signature(ln.sweep).parameters)[:2] == ['fn', 'grid']\n"
            "def f(x):\n    return {'y': 2.0 * x}\n"
            f"df = ln.sweep(f, {{'x': [1.0, 2.0]}}, store={str(tmp_path / 's.sqlite')!r}, jobs=0, progress=False)\n"
            "assert list(df['y']) == [2.0, 4.0]\n"
            "import numpy as np\n"
            "ss = np.random.SeedSequence(1, spawn_key=(0,))\n"
            "print(ln.sweep.stream(ss, 0).random() == ln.sweep.point_rng(1, 0).random())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=os.path.dirname(PACKAGE_DIR))
    assert proc.returncode == 0 and proc.stdout.strip() == "True", proc.stderr
