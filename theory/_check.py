"""Shared reporting for the derivation checks in this folder.

Each ``theory/NAME.py`` records its checks with :func:`check` (a boolean) or
:func:`check_zero` (a sympy expression that must simplify to zero) and ends with
:func:`finish`, which exits non-zero if any check failed.
"""
import sys

import sympy as sp

FAILED = []


def check(name, ok):
    """Record one check; print ``ok``/``FAIL`` and its name."""
    ok = bool(ok)
    print(("ok   " if ok else "FAIL ") + name)
    if not ok:
        FAILED.append(name)
    return ok


def check_zero(name, expr):
    """Record that ``expr`` simplifies to exactly zero."""
    return check(name, sp.simplify(expr) == 0)


def finish():
    """Print the summary and exit: status 1 if any check failed."""
    print(f"{len(FAILED)} check(s) failed" if FAILED else "all checks passed")
    sys.exit(1 if FAILED else 0)
