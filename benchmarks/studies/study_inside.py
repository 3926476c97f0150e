"""How legible the simulator's inside is, read from the AST of ``linearnets/sim``.

Prints, for the tree on ``PYTHONPATH`` (or ``--root``):

- the functions that take more than ``--max-params`` parameters (``self`` and ``cls``
  not counted; ``*args``/``**kwargs`` count one each), the public front ends apart;
- the ``hasattr``/``getattr`` calls;
- the subscripts of a named array by one constant integer (``th[3]``; not ``th[-1]``,
  ``K[0, m]`` or ``th[:2]``), by name;
- the lines of ``sim/`` and the import circles among the package's modules (module-level
  imports only: an import inside a function breaks a circle on purpose).

Usage::

    python benchmarks/studies/study_inside.py [--root DIR] [--max-params 12] [--list]
"""
from __future__ import annotations

import argparse
import ast
import collections
import os
import sys

#: The public front ends, whose keywords are the contract (not counted).
FRONT_ENDS = {"gradient_flow", "prepare_flow", "gradient_flow_ensemble", "gradient_descent"}


def _files(root, sub):
    for d, _, names in os.walk(os.path.join(root, sub)):
        for name in sorted(names):
            if name.endswith(".py"):
                yield os.path.join(d, name)


def _nparams(fn):
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names) + (a.vararg is not None) + (a.kwarg is not None)


def _const_int(node):
    return isinstance(node, ast.Constant) and type(node.value) is int


def _module(root, path):
    rel = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


def _imports(tree, mod, is_pkg, modules):
    """Modules of the package that ``mod`` imports at module level (not inside functions):
    ``from P import x`` imports the module ``P.x`` where there is one, else ``P``."""
    out = set()
    pkg = mod if is_pkg else mod.rpartition(".")[0]
    for node in tree.body:
        nodes = [node]
        if isinstance(node, (ast.If, ast.Try)):
            nodes = list(ast.walk(node))
        for n in nodes:
            if isinstance(n, ast.Import):
                out.update(a.name for a in n.names if a.name.startswith("linearnets"))
            elif isinstance(n, ast.ImportFrom):
                if n.level:
                    base = pkg.split(".")
                    base = base[:len(base) - (n.level - 1)]
                    target = ".".join(base + ([n.module] if n.module else []))
                else:
                    target = n.module or ""
                if not target.startswith("linearnets"):
                    continue
                for a in n.names:
                    sub = f"{target}.{a.name}"
                    out.add(sub if sub in modules else target)
    return out


def _circles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--max-params", type=int, default=12)
    ap.add_argument("--list", action="store_true", help="name every hit")
    args = ap.parse_args(argv)
    root = os.path.abspath(args.root)
    long_fns, probes, subs, lines = [], [], collections.Counter(), 0
    sub_where = collections.Counter()
    for path in _files(root, os.path.join("linearnets", "sim")):
        rel = os.path.relpath(path, os.path.join(root, "linearnets", "sim"))
        with open(path) as f:
            text = f.read()
        lines += text.count("\n")
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                k = _nparams(node)
                if k > args.max_params and node.name not in FRONT_ENDS:
                    long_fns.append((k, f"{rel}:{node.lineno} {node.name}"))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("hasattr", "getattr")):
                probes.append(f"{rel}:{node.lineno} {node.func.id}")
            elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
                if _const_int(node.slice):
                    subs[node.value.id] += 1
                    sub_where[rel] += 1
    graph = {}
    paths = list(_files(root, "linearnets"))
    modules = {_module(root, p) for p in paths}
    for path in paths:
        mod = _module(root, path)
        with open(path) as f:
            tree = ast.parse(f.read())
        graph[mod] = _imports(tree, mod, path.endswith("__init__.py"), modules)
    # a package's __init__ importing its own submodules is no circle by itself
    circles = _circles({m: {t for t in ts if t != m} for m, ts in graph.items()})

    print(f"tree: {root}")
    print(f"functions in linearnets/sim with > {args.max_params} parameters "
          f"(front ends apart): {len(long_fns)}")
    for k, where in sorted(long_fns, reverse=True):
        print(f"    {k:3d}  {where}")
    print(f"hasattr/getattr calls in sim/: {len(probes)}")
    if args.list:
        for p in probes:
            print(f"    {p}")
    print(f"constant-integer subscripts of named arrays in sim/: {sum(subs.values())}")
    print("    by name: " + ", ".join(f"{n} {c}" for n, c in subs.most_common(12)))
    print("    by file: " + ", ".join(f"{n} {c}" for n, c in sub_where.most_common()))
    print(f"lines in sim/: {lines}")
    print(f"import circles in linearnets: {len(circles)}")
    for c in circles:
        print("    " + " <-> ".join(c))


if __name__ == "__main__":
    main()
