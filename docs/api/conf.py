"""Sphinx configuration of the API reference (``sphinx-build -W -b html docs/api OUT``).

The reference is generated from the numpydoc docstrings of the public names of
:mod:`linearnets` (``linearnets.__all__``, or without it every public name the
package re-exports), grouped by the subpackage that defines them; the list is
written to ``reference.rst`` when the build starts, so a new export needs no edit
here.  ``autosummary`` writes one page per name into ``generated/``.
"""
import inspect
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..")))

import linearnets  # noqa: E402

project = "linearnets"
author = "the linearnets developers"
release = version = linearnets.__version__
extensions = ["sphinx.ext.autodoc", "sphinx.ext.autosummary", "numpydoc"]
autosummary_generate = True
autodoc_default_options = {"members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path = []

#: Section of the reference for each subpackage (first match of the defining module).
SECTIONS = [
    ("linearnets.theory", "Closed forms (linearnets.theory)"),
    ("linearnets.sim", "Simulation (linearnets.sim)"),
    ("linearnets.data", "Data (linearnets.data)"),
    ("linearnets.regimes", "Regimes, lazy and rich (linearnets.regimes)"),
    ("linearnets.compare", "Theory against simulation (linearnets.compare)"),
    ("linearnets._compare", "Theory against simulation (linearnets.compare)"),
    ("linearnets.sweep", "Sweeps (linearnets.sweep)"),
]


def public_names():
    """``linearnets.__all__``, or the public non-module names the package re-exports."""
    names = getattr(linearnets, "__all__", None)
    if names is None:
        names = [n for n, v in vars(linearnets).items() if not n.startswith("_") and not inspect.ismodule(v)]
    return sorted(set(names), key=str.lower)


def _section(obj):
    mod = getattr(obj, "__module__", None) or ""
    if not (inspect.isclass(obj) or inspect.isroutine(obj)):
        mod = ""
    for prefix, title in SECTIONS:
        if mod == prefix or mod.startswith(prefix + ".") or mod.startswith(prefix + "_"):
            return title
    return "Other"


def write_reference(path):
    groups = {}
    for name in public_names():
        groups.setdefault(_section(getattr(linearnets, name)), []).append(name)
    order = [t for _, t in SECTIONS] + ["Other"]
    lines = ["Reference", "=========", "", ".. currentmodule:: linearnets", ""]
    for title in dict.fromkeys(order):
        if title not in groups:
            continue
        lines += [title, "-" * len(title), "", ".. autosummary::", "   :toctree: generated", ""]
        lines += [f"   {n}" for n in groups[title]] + [""]
    text = "\n".join(lines)
    old = open(path).read() if os.path.exists(path) else None
    if text != old:
        with open(path, "w") as fh:
            fh.write(text)


write_reference(os.path.join(HERE, "reference.rst"))

#: Inline literals and roles, left as they are by :func:`escape_bars`.
_LITERAL = re.compile(r"(``.+?``|:[\w:]+:`[^`]*`)")


def escape_bars(app, what, name, obj, options, lines):
    """The docstrings write absolute values and norms as |x| in plain-text maths; reST would read
    |x| as a substitution, so bars outside inline literals are escaped."""
    for i, line in enumerate(lines):
        if "|" in line:
            parts = _LITERAL.split(line)
            lines[i] = "".join(p if k % 2 else p.replace("|", "\\|") for k, p in enumerate(parts))


def setup(app):
    app.connect("autodoc-process-docstring", escape_bars)
