"""Sweep specifications: axes, grids, canonical parameters and point keys.

A sweep is a grid of points; each point is one call ``fn(**params)``. This
module turns a ``[grid]`` description (TOML or a Python dict) into typed axes,
expands the grid in a fixed order and gives every point a key that depends only
on its parameters, the function name and the sweep ``version``:

    key = sha256(json({"fn": name, "version": version,
                       "params": canonical(params)}))[:32]

where ``canonical`` coerces each axis value to the axis's declared type and
rounds floats to 12 significant digits, so that ``0.1`` typed in a spec and
``10 ** -1`` computed by ``logspace`` are the same point.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import itertools
import json
import math
import os
import sys
from typing import Any

__all__ = ["SpecError", "Axis", "SweepSpec", "make_axis", "load_spec", "canonical",
           "point_key", "resolve_function", "function_name"]

_TYPES = {"float": float, "int": int, "str": str, "bool": bool}


class SpecError(ValueError):
    """A sweep specification that cannot be run; the message names the problem in one line."""


def _coerce(value, typ, axis):
    """Coerce one axis value to its declared type, or raise SpecError naming the axis."""
    if typ is bool:
        if isinstance(value, bool):
            return value
        raise SpecError(f"axis {axis!r}: value {value!r} is not a bool")
    if typ is int:
        if isinstance(value, bool):
            raise SpecError(f"axis {axis!r}: value {value!r} is a bool, not an int")
        if isinstance(value, int) or (hasattr(value, "dtype") and getattr(value.dtype, "kind", "") in "iu"):
            return int(value)
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise SpecError(f"axis {axis!r}: value {value!r} is not an int")
    if typ is float:
        if isinstance(value, bool) or isinstance(value, str):
            raise SpecError(f"axis {axis!r}: value {value!r} is not a number")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise SpecError(f"axis {axis!r}: value {value!r} is not a number") from None
    if typ is str:
        if isinstance(value, str):
            return value
        raise SpecError(f"axis {axis!r}: value {value!r} is not a string")
    raise SpecError(f"axis {axis!r}: unknown type {typ!r}")  # pragma: no cover


def _infer_type(values, axis):
    kinds = set()
    for v in values:
        if isinstance(v, bool):
            kinds.add(bool)
        elif isinstance(v, int) or (hasattr(v, "dtype") and getattr(v.dtype, "kind", "") in "iu"):
            kinds.add(int)
        elif isinstance(v, float) or (hasattr(v, "dtype") and getattr(v.dtype, "kind", "") == "f"):
            kinds.add(float)
        elif isinstance(v, str):
            kinds.add(str)
        else:
            raise SpecError(f"axis {axis!r}: value {v!r} is not a float, int, str or bool")
    if kinds <= {int}:
        return int
    if kinds <= {int, float}:
        return float
    if len(kinds) == 1:
        return kinds.pop()
    raise SpecError(f"axis {axis!r}: mixed value types {sorted(k.__name__ for k in kinds)}")


@dataclasses.dataclass(frozen=True)
class Axis:
    """One grid axis: a name, its declared type and its values (already coerced)."""

    name: str
    type: type
    values: tuple

    def __len__(self):
        return len(self.values)


def _three(form, spec, axis):
    if not (isinstance(spec, (list, tuple)) and len(spec) == 3):
        raise SpecError(f"axis {axis!r}: {form} takes [start, stop, n], got {spec!r}")
    a, b, n = spec
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise SpecError(f"axis {axis!r}: {form} count n must be an int >= 1, got {n!r}")
    for v in (a, b):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise SpecError(f"axis {axis!r}: {form} bounds must be finite numbers, got {spec!r}")
    return float(a), float(b), n


def make_axis(name, spec):
    """Build an :class:`Axis` from one ``[grid]`` entry.

    Parameters
    ----------
    name : str
    spec : list, range, or dict
        A list of values (type inferred: all ints -> int, ints and floats ->
        float, else one of str / bool); ``{"logspace": [a, b, n]}`` (``n`` floats
        ``10**a .. 10**b``, evenly spaced exponents, as ``numpy.logspace``);
        ``{"linspace": [a, b, n]}``; ``{"range": [a, b]}`` or ``[a, b, step]``
        (ints, ``b`` excluded, as Python's ``range``); or ``{"values": [...],
        "type": "float" | "int" | "str" | "bool"}`` to declare the type.

    Returns
    -------
    Axis

    Raises
    ------
    SpecError
        For an unknown form, a malformed form or values of the wrong type.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise SpecError(f"axis name {name!r} is not a valid Python identifier")
    if isinstance(spec, range):
        spec = list(spec)
    if isinstance(spec, dict):
        keys = set(spec)
        if keys == {"logspace"} or keys == {"linspace"}:
            form = keys.pop()
            a, b, n = _three(form, spec[form], name)
            step = (b - a) / (n - 1) if n > 1 else 0.0
            pts = [a + k * step for k in range(n)]
            if n > 1:
                pts[-1] = b
            vals = [10.0 ** p for p in pts] if form == "logspace" else pts
            return Axis(name, float, tuple(vals))
        if keys == {"range"}:
            r = spec["range"]
            if not (isinstance(r, (list, tuple)) and len(r) in (2, 3)
                    and all(isinstance(v, int) and not isinstance(v, bool) for v in r)):
                raise SpecError(f"axis {name!r}: range takes [start, stop] or [start, stop, step] ints, got {r!r}")
            vals = tuple(range(*r))
            if not vals:
                raise SpecError(f"axis {name!r}: range {list(r)!r} is empty")
            return Axis(name, int, vals)
        if "values" in keys and keys <= {"values", "type"}:
            vals = spec["values"]
            if not isinstance(vals, (list, tuple)) or not vals:
                raise SpecError(f"axis {name!r}: values must be a non-empty list")
            tname = spec.get("type")
            if tname is None:
                typ = _infer_type(vals, name)
            elif tname in _TYPES:
                typ = _TYPES[tname]
            else:
                raise SpecError(f"axis {name!r}: unknown type {tname!r} (expected one of {', '.join(_TYPES)})")
            return Axis(name, typ, tuple(_coerce(v, typ, name) for v in vals))
        raise SpecError(f"axis {name!r}: unknown axis form {sorted(keys)} "
                        "(expected a list, or one of logspace, linspace, range, values)")
    if isinstance(spec, (list, tuple)) or (hasattr(spec, "tolist") and hasattr(spec, "ndim")):
        vals = list(spec.tolist() if hasattr(spec, "tolist") else spec)
        if not vals:
            raise SpecError(f"axis {name!r}: empty list of values")
        typ = _infer_type(vals, name)
        return Axis(name, typ, tuple(_coerce(v, typ, name) for v in vals))
    raise SpecError(f"axis {name!r}: unknown axis form {type(spec).__name__} "
                    "(expected a list, or one of logspace, linspace, range, values)")


def _canon_value(v):
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if v == 0.0:
            return 0.0
        return float(f"{v:.11e}")  # 12 significant digits
    if hasattr(v, "tolist"):
        return _canon_value(v.tolist())
    if isinstance(v, (list, tuple)):
        return [_canon_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _canon_value(x) for k, x in sorted(v.items())}
    raise SpecError(f"parameter value {v!r} of type {type(v).__name__} cannot be part of a sweep key")


def canonical(params):
    """The canonical form of a parameter dict: sorted keys, floats to 12 significant digits.

    Parameters
    ----------
    params : dict
        Parameter name -> value (already coerced to the axis type).

    Returns
    -------
    str
        Compact JSON, identical for parameters that agree to 12 digits.
    """
    return json.dumps({str(k): _canon_value(v) for k, v in params.items()}, sort_keys=True,
                      separators=(",", ":"))


def point_key(fn_name, version, params):
    """Key of one point: a hash of the canonical parameters, the function name and the version.

    Returns
    -------
    str
        32 hexadecimal digits.
    """
    payload = json.dumps({"fn": str(fn_name), "version": str(version), "params": json.loads(canonical(params))},
                         sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def function_name(fn):
    """``"module:qualname"`` of a callable, or the string itself for ``"module:callable"``."""
    if isinstance(fn, str):
        return fn
    mod = getattr(fn, "__module__", None)
    qual = getattr(fn, "__qualname__", None)
    if not mod or not qual or "<" in qual:
        raise SpecError(f"function {fn!r} is not importable by name (define it at module level)")
    return f"{mod}:{qual}"


def resolve_function(ref):
    """Import ``"module:callable"`` (or pass a callable through).

    Raises
    ------
    SpecError
        When the module or the attribute does not exist or is not callable.
    """
    if callable(ref):
        return ref
    if not isinstance(ref, str) or ref.count(":") != 1:
        raise SpecError(f"function {ref!r} must be given as 'module:callable'")
    mod_name, attr = ref.split(":")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise SpecError(f"unknown function {ref!r}: cannot import module {mod_name!r} ({exc})") from None
    obj = mod
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise SpecError(f"unknown function {ref!r}: module {mod_name!r} has no {attr!r}")
    if not callable(obj):
        raise SpecError(f"function {ref!r} is not callable")
    return obj


@dataclasses.dataclass
class SweepSpec:
    """A resolved sweep: function, axes, fixed parameters, store path and seeding entropy."""

    name: str
    function: str
    version: str
    store: str
    axes: list
    fixed: dict
    entropy: int
    warmup: Any = None
    plot: Any = None
    table: Any = None
    path: Any = None
    raw: dict = dataclasses.field(default_factory=dict)

    @property
    def shape(self):
        return tuple(len(a) for a in self.axes)

    def points(self):
        """Grid points in row-major axis order, as ``(key, params)`` with params = axes + fixed.

        Points whose canonical parameters coincide are listed once.
        """
        names = [a.name for a in self.axes]
        seen = set()
        out = []
        for combo in itertools.product(*(a.values for a in self.axes)):
            params = dict(self.fixed)
            params.update(zip(names, combo))
            key = point_key(self.function, self.version, params)
            if key not in seen:
                seen.add(key)
                out.append((key, params))
        return out


def _load_toml(path):
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        try:
            import tomli as tomllib
        except ImportError:
            raise SpecError("reading a TOML spec needs Python >= 3.11 or the 'tomli' package") from None
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise SpecError(f"spec file {path!r} not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"spec file {path!r} is not valid TOML: {exc}") from None


DEFAULT_ENTROPY = 0x6C696E6561726E657473  # "linearnets"


def build_spec(function, grid, fixed=None, store="sweep.sqlite", version="1", name=None, entropy=None,
               warmup=None, plot=None, path=None, raw=None, check_function=True, table=None):
    """Validate the pieces of a sweep and return a :class:`SweepSpec` (used by ``sweep`` and ``load_spec``)."""
    fname = function_name(function)
    if check_function:
        resolve_function(function)
    if not isinstance(grid, dict) or not grid:
        raise SpecError("grid must be a non-empty table of axes")
    axes = [make_axis(k, v) for k, v in grid.items()]
    fixed = dict(fixed or {})
    for k in fixed:
        if not isinstance(k, str) or not k.isidentifier():
            raise SpecError(f"fixed parameter name {k!r} is not a valid Python identifier")
        if k in grid:
            raise SpecError(f"parameter {k!r} is both a grid axis and fixed")
    canonical(fixed)  # raises for values that cannot be keyed
    if entropy is None:
        entropy = DEFAULT_ENTROPY
    if isinstance(entropy, bool) or not isinstance(entropy, int) or entropy < 0:
        raise SpecError(f"entropy must be a non-negative int, got {entropy!r}")
    store = os.fspath(store)
    parent = os.path.dirname(os.path.abspath(store))
    if not os.path.isdir(parent):
        raise SpecError(f"store folder {parent!r} does not exist")
    return SweepSpec(name=str(name or fname), function=fname, version=str(version),
                     store=os.path.abspath(store), axes=axes, fixed=fixed, entropy=int(entropy),
                     warmup=warmup, plot=plot, table=table, path=path, raw=raw or {})


def load_spec(path, full=False):
    """Read a TOML sweep spec.

    The file has ``[sweep]`` (``name``, ``function = "module:callable"``,
    ``version``, ``store`` relative to the spec file, optional ``entropy``,
    ``description``,
    ``warmup = "module:callable"`` run once per worker, ``plot =
    "module:callable"``, ``table = "module:callable"``: the figure's results
    table, see :func:`linearnets.sweep.plot.plot_sweep`), ``[grid]`` (the axes, see :func:`make_axis`) and
    ``[fixed]`` (constants). An optional ``[full]`` table holds ``grid``,
    ``fixed`` and ``store`` overrides used with ``full=True`` (the paper-sized
    run). The spec's folder is put on ``sys.path``, so the function may live
    in a module beside the spec.

    Parameters
    ----------
    path : str
    full : bool

    Returns
    -------
    SweepSpec

    Raises
    ------
    SpecError
        With a one-line message naming the problem.
    """
    raw = _load_toml(path)
    unknown = set(raw) - {"sweep", "grid", "fixed", "full"}
    if unknown:
        raise SpecError(f"spec {path!r}: unknown table(s) {sorted(unknown)} (expected sweep, grid, fixed, full)")
    sw = raw.get("sweep")
    if not isinstance(sw, dict):
        raise SpecError(f"spec {path!r}: missing [sweep] table")
    unknown = set(sw) - {"name", "function", "version", "store", "entropy", "warmup", "plot", "table",
                       "description"}
    if unknown:
        raise SpecError(f"spec {path!r}: unknown [sweep] key(s) {sorted(unknown)}")
    for req in ("function", "store"):
        if req not in sw:
            raise SpecError(f"spec {path!r}: [sweep] needs {req!r}")
    grid = dict(raw.get("grid") or {})
    fixed = dict(raw.get("fixed") or {})
    store = sw["store"]
    if full:
        fu = raw.get("full") or {}
        unknown = set(fu) - {"grid", "fixed", "store"}
        if unknown:
            raise SpecError(f"spec {path!r}: unknown [full] key(s) {sorted(unknown)}")
        grid.update(fu.get("grid") or {})
        fixed.update(fu.get("fixed") or {})
        store = fu.get("store", store)
    base = os.path.dirname(os.path.abspath(path))
    store = store if os.path.isabs(store) else os.path.join(base, store)
    # a spec's own modules (function, plot) may sit next to it: importable here and in local
    # workers, which inherit this path; Dask workers need them installed or on their PYTHONPATH
    if base not in sys.path:
        sys.path.insert(0, base)
    for k in ("warmup", "plot", "table"):
        if k in sw:
            resolve_function(sw[k])
    return build_spec(sw["function"], grid, fixed, store=store, version=sw.get("version", "1"),
                      name=sw.get("name"), entropy=sw.get("entropy"), warmup=sw.get("warmup"),
                      plot=sw.get("plot"), table=sw.get("table"), path=os.path.abspath(path), raw=raw)
