"""The registry of ``verify``: the result of a check (:class:`Comparison`), the check itself
(:class:`Check`: name, description, run, plot, presets), the one table :data:`CHECKS`
and :func:`run_checks`.

This module knows no topic: the entries of :data:`CHECKS` are written in one table in
:mod:`linearnets.compare` (the package's ``__init__``), which imports the topic modules.
A row finds its figure through the registry (``CHECKS[row.kind].plot``).
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
from types import MappingProxyType
from typing import Callable, Mapping

import numpy as np

from .._validation import check_int, fresh_seed
from ..backend import check_backend
from .plotting import figure, title

__all__ = ["Comparison", "Skipped", "Check", "CHECKS", "PRESETS", "register", "run_checks"]

#: The sizes ``verify`` runs at: ``small`` (the default, minutes), ``full`` (larger
#: problems, more sigmas and samples) and ``paper`` (the sizes of the source papers'
#: figures). A check without a ``full`` preset runs its ``small`` arguments there, and
#: one without ``paper`` its ``full`` arguments.
PRESETS = ("small", "full", "paper")


def _freeze(value):
    if isinstance(value, np.ndarray):
        value = value.copy()
        value.setflags(write=False)
        return value
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], np.ndarray):
        return tuple(_freeze(v) for v in value)
    return value


@dataclasses.dataclass(frozen=True)
class Comparison:
    """Outcome of one theory-versus-simulation comparison (immutable).

    Attributes
    ----------
    name : str
        Short identifier (also the figure's file name).
    title : str
        One-line description.
    quantity : str
        What ``theory`` and ``simulation`` are (e.g. "slope of log error vs log sigma").
    theory, simulation : float
        The headline number predicted by the theory and measured in simulation.
    error : float
        The error metric (defined in ``quantity``/``notes``).
    tolerance : float
        The error the theory predicts (times :data:`SAFETY` where only the
        scaling is known).
    passed : bool
        ``error <= tolerance`` (and any extra condition stated in ``notes``).
    arrays : Mapping[str, ndarray]
        Read-only arrays behind the plot (time grids, curves, ...).
    params : Mapping[str, object]
        The physical parameters used.
    notes : str
        How the tolerance was derived, and what the figure shows.
    kind : str
        The registered check whose figure draws it (default: ``name``; e.g. the
        row ``silent_alignment_L3`` is drawn by the figure of ``silent_alignment``).
    inequality : str
        For an ordering check (the theory predicts only ``lhs < rhs``): the
        inequality in words, e.g. ``"t_A < t_L"``; ``theory`` then holds the left
        side and ``simulation`` the right side, and the table prints the
        inequality with both values instead of an error and a tolerance.
    exception : str
        Set when the check raised instead of returning (see
        :meth:`from_exception`): ``status`` is then ``"ERROR"``.
    """

    name: str
    title: str
    quantity: str
    theory: float
    simulation: float
    error: float
    tolerance: float
    passed: bool
    arrays: Mapping = dataclasses.field(default_factory=dict)
    params: Mapping = dataclasses.field(default_factory=dict)
    notes: str = ""
    kind: str = ""
    inequality: str = ""
    exception: str = ""

    def __post_init__(self):
        object.__setattr__(self, "arrays",
                           MappingProxyType({k: _freeze(v) for k, v in dict(self.arrays).items()}))
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        for f in ("theory", "simulation", "error", "tolerance"):
            object.__setattr__(self, f, float(getattr(self, f)))
        object.__setattr__(self, "passed", bool(self.passed))
        if not self.kind:
            object.__setattr__(self, "kind", self.name)

    def plot(self):
        """Draw the comparison (matplotlib, no pyplot state; Agg-safe).

        Returns
        -------
        matplotlib.figure.Figure
        """
        if self.exception:
            raise ValueError(f"{self.name} raised ({self.exception}); an ERROR row has no figure")
        check = CHECKS.get(self.kind)
        if check is None or check.plot is None:
            known = ", ".join(n for n, c in CHECKS.items() if c.plot is not None)
            raise ValueError(f"no figure for kind {self.kind!r}; known: {known}")
        fig = check.plot(self)
        title(fig, self)
        return fig

    @property
    def status(self):
        """``"PASS"``, ``"FAIL"`` or ``"ERROR"`` (the check raised: see ``exception``)."""
        if self.exception:
            return "ERROR"
        return "PASS" if self.passed else "FAIL"

    @classmethod
    def from_exception(cls, name, title, exc):
        """The row of a check that raised ``exc``: status ERROR, the message in ``exception``."""
        msg = f"{type(exc).__name__}: {exc}".strip()
        nan = float("nan")
        return cls(name=name, title=title, quantity="(the check raised)", theory=nan, simulation=nan,
                   error=nan, tolerance=nan, passed=False, notes=msg, kind="error", exception=msg)

    def row(self):
        """The table row: (name, theory, simulation, error, tolerance, status).

        For an ordering check the theory column holds the inequality tested
        (e.g. ``"t_A < t_L"``), the simulation column the measured sides
        (``"12.1 < 45.3"``) and error and tolerance are empty; an ERROR row has
        its message in the theory column.
        """
        if self.exception:
            return (self.name, self.exception, "", "", "", "ERROR")
        if self.inequality:
            op = next((o for o in ("<=", ">=", "<", ">") if o in self.inequality), "<")
            return (self.name, self.inequality, f"{self.theory:.4g} {op} {self.simulation:.4g}", "", "",
                    self.status)
        return (self.name, self.theory, self.simulation, self.error, self.tolerance, self.status)

    def __repr__(self):
        if self.exception:
            return f"Comparison({self.name!r}: ERROR {self.exception})"
        if self.inequality:
            return (f"Comparison({self.name!r}: {self.inequality}: {self.theory:.4g} vs {self.simulation:.4g}, "
                    f"{'passed' if self.passed else 'FAILED'})")
        return (f"Comparison({self.name!r}: theory={self.theory:.4g}, simulation={self.simulation:.4g}, "
                f"error={self.error:.3g}, tolerance={self.tolerance:.3g}, "
                f"{'passed' if self.passed else 'FAILED'})")


class Skipped(Comparison):
    """The row of a check whose optional dependency is missing: status ``"SKIP"``.

    It counts as passed (nothing was tested, nothing failed), prints the reason in the
    theory column of the table, and its figure is a note with the reason.
    """

    @property
    def status(self):
        return "SKIP"

    def row(self):
        return (self.name, self.notes, "", "", "", "SKIP")

    def plot(self):
        fig, axes = figure(1, height=1.2)
        axes[0].set_axis_off()
        axes[0].text(0.5, 0.5, f"{self.name}: skipped ({self.notes})", ha="center", va="center", fontsize=8,
                     wrap=True)
        return fig

    def __repr__(self):
        return f"Comparison({self.name!r}: SKIP {self.notes})"

    @classmethod
    def because(cls, name, title, reason):
        """The SKIP row of check ``name``, with ``reason`` in its notes."""
        nan = float("nan")
        return cls(name=name, title=title, quantity="(skipped)", theory=nan, simulation=nan, error=nan,
                   tolerance=nan, passed=True, notes=reason, kind="skip")


# =============================================================================
# the registry
# =============================================================================
@dataclasses.dataclass(frozen=True, eq=False)
class Check:
    """One entry of ``verify``: one row of its table.

    Attributes
    ----------
    name : str
        The row's name: in ``--list``, ``--only``, the table, the figure ``NAME.png``
        and the report (an identifier: letters, digits, ``_``).
    description : str
        One line for ``--list``.
    run : callable
        ``run(**kwargs, seed=S, backend=B) -> Comparison`` (or a list of them), with
        ``kwargs`` the preset's arguments; ``backend`` is passed only if ``run`` takes it.
    plot : callable, optional
        ``plot(row) -> matplotlib.figure.Figure``: the figure of every row whose ``kind``
        is this check's name (:meth:`Comparison.plot` adds the title).
    presets : mapping
        ``{"small" | "full" | "paper": kwargs}``; a missing preset falls back to the
        next smaller one (``paper`` -> ``full`` -> ``small`` -> no arguments).
    requires : mapping
        ``{module: reason}``: optional modules the check imports; if one is missing the
        row is :class:`Skipped` with that reason.
    """

    name: str
    description: str
    run: Callable
    plot: Callable = None
    presets: Mapping = dataclasses.field(default_factory=dict)
    requires: Mapping = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"check name must be a non-empty identifier, got {self.name!r}")
        unknown = set(self.presets) - set(PRESETS)
        if unknown:
            raise ValueError(f"check {self.name!r}: unknown preset(s) {sorted(unknown)}; known: {PRESETS}")
        object.__setattr__(self, "presets", MappingProxyType({k: MappingProxyType(dict(v))
                                                              for k, v in self.presets.items()}))
        object.__setattr__(self, "requires", MappingProxyType(dict(self.requires)))

    def arguments(self, preset="small"):
        """The keyword arguments of ``run`` under ``preset`` (a fresh dict)."""
        if preset not in PRESETS:
            raise ValueError(f"preset must be one of {PRESETS}, got {preset!r}")
        for p in PRESETS[PRESETS.index(preset)::-1]:
            if p in self.presets:
                return dict(self.presets[p])
        return {}

    def __call__(self, preset="small", seed=0, backend="auto"):
        """Run the check; returns its rows (a list of :class:`Comparison`), named after the check."""
        for module, reason in self.requires.items():
            try:
                importlib.import_module(module)
            except ImportError:
                return [Skipped.because(self.name, self.description, reason)]
        kw = self.arguments(preset)
        try:
            params = inspect.signature(self.run).parameters
        except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
            params = {}
        takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
        if takes_any or "backend" in params:
            kw["backend"] = backend
        return _rows_of(self.name, self.run(seed=seed, **kw))


#: The checks ``python -m linearnets verify`` runs, in order: ``{name: Check}``. Its
#: entries are the table in :mod:`linearnets.compare`.
CHECKS: dict = {}


def register(*checks):
    """Add :class:`Check` entries to :data:`CHECKS` (names unique: a second one is a ValueError)."""
    for c in checks:
        if not isinstance(c, Check):
            raise TypeError(f"register takes Check entries, got {c!r}")
        if c.name in CHECKS and CHECKS[c.name] is not c:
            raise ValueError(f"check {c.name!r} is already registered")
        CHECKS[c.name] = c
    return checks[0] if len(checks) == 1 else checks


def _rows_of(name, out):
    """The rows of check ``name`` from what its runner returned (one Comparison, or a list)."""
    rows = [out] if isinstance(out, Comparison) else list(out)
    if not rows or not all(isinstance(r, Comparison) for r in rows):
        raise TypeError(f"check {name!r} must return a Comparison (or a list of them), got {out!r}")
    if len(rows) == 1:
        return [rows[0] if rows[0].name == name else dataclasses.replace(rows[0], name=name)]
    return [r if r.name.startswith(name + ".") else dataclasses.replace(r, name=f"{name}.{r.name}")
            for r in rows]


def run_checks(names=None, full=False, seed=0, backend="auto", progress=False, preset=None):
    """Run the registered checks and return their :class:`Comparison` rows.

    Parameters
    ----------
    names : str or sequence of str, optional
        One check, or a subset of :data:`CHECKS` (default: all, in registry order).
    full : bool
        Shorthand for ``preset="full"``.
    seed : int or None
        An int >= 0: every check derives its own seeds from it (``seed + k``); None draws
        a fresh int, which the rows' ``params["seed"]`` record (so that the run can be
        repeated with it).
    backend : str
        One of :data:`linearnets.backend.BACKENDS`, passed to :func:`linearnets.gradient_flow`.
    progress : bool
        Show a tqdm progress bar (on stderr).
    preset : {"small", "full", "paper"}, optional
        The sizes to run at (:data:`PRESETS`; default ``"small"``, or ``"full"`` with ``full``).

    Returns
    -------
    list of Comparison
        One row per check, named as the check. A check that raises (any
        ``Exception``; not ``KeyboardInterrupt``) gives a row with status
        ``"ERROR"`` and the message (:meth:`Comparison.from_exception`), and the
        remaining checks still run.
    """
    if preset is None:
        preset = "full" if full else "small"
    elif full and preset != "full":
        raise ValueError(f"full=True contradicts preset={preset!r}")
    if not isinstance(preset, str) or preset not in PRESETS:
        raise ValueError(f"preset must be one of {PRESETS}, got {preset!r}")
    seed = fresh_seed() if seed is None else check_int(seed, "seed", 0)
    check_backend(backend)
    if names is None:
        names = list(CHECKS)
    elif isinstance(names, str):
        names = [names]
    elif not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"names must be None, a check name or a sequence of check names, got {names!r}")
    names = list(names)
    if not names:
        raise ValueError("names must name at least one check, got an empty sequence")
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ValueError(f"names: unknown check(s) {unknown}; available: {', '.join(CHECKS)}")
    results = []
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(names), desc="verify", unit="check", leave=True)
    try:
        for n in names:
            if bar is not None:
                bar.set_postfix_str(n)
            try:
                results.extend(CHECKS[n](preset, seed=seed, backend=backend))
            except Exception as exc:  # noqa: BLE001  a failing check is a row, not the end of verify
                results.append(Comparison.from_exception(n, CHECKS[n].description, exc))
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return results
