"""Where numba keeps the compiled kernels of this package: a user cache directory.

numba's default for ``@njit(cache=True)`` writes ``*.nbi`` / ``*.nbc`` files
into ``__pycache__`` beside each source file.  Inside an installed package that
is ``site-packages/linearnets/...``, and pip's uninstall does not remove them:
the leftover folder then imports as an empty namespace package that hides a
later (e.g. editable) install.  This module registers a cache locator that
keeps the files of *this package's* kernels out of the package folders, in

    ``$LINEARNETS_CACHE_DIR/<key>``                if that variable is set, else
    ``$XDG_CACHE_HOME/linearnets/numba/<key>``     (``~/.cache`` without XDG_CACHE_HOME),

falling back to ``<tempdir>/linearnets-<user>/numba/<key>`` when that is not
writable.  ``<key>`` is the package version and a hash of the sources of every
module that defines a cached kernel and of every package module those import
(transitively), plus the numba and Python versions.  The hash matters: numba
checks only the source file of the function it loads, so a kernel whose callee
in another file changed would otherwise load stale machine code.

Only functions defined in files under this package are affected; the caching of
the user's own numba code (and ``NUMBA_CACHE_DIR``) is left alone.  The module
must be imported before any ``@njit(cache=True)`` of the package is applied,
which :mod:`linearnets` does first thing.  It imports numba lazily only if numba
is installed; without numba it does nothing.
"""
from __future__ import annotations

import getpass
import hashlib
import importlib.util
import os
import re
import sys
import tempfile
import time

__all__ = ["ENV_VAR", "cache_dir", "cache_key", "kernel_sources", "install", "compile_count",
           "set_compile_notice"]

#: Environment variable naming the cache's parent directory (the key is appended).
ENV_VAR = "LINEARNETS_CACHE_DIR"

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_KERNEL_MARK = re.compile(r"jit\([^)\n]*cache\s*=\s*True")
_REL_IMPORT = re.compile(r"^\s*from\s+(\.+)([\w.]*)\s+import\s+([^\n#]+)", re.M)
_ABS_IMPORT = re.compile(r"^\s*(?:from|import)\s+linearnets((?:\.\w+)*)", re.M)
#: Key directories not used for this long are removed (best effort) when another key is set up.
_STALE_SECONDS = 30 * 24 * 3600

_state = {"dir": None, "installed": False, "notice": True, "noticed": False, "compiles": 0}

_NOTICE = ("linearnets: compiling numba kernels for first use (once; later runs load them "
           "from {dir}). `python -m linearnets warmup` compiles them all ahead of time.\n")


def _module_file(package_dir, parts):
    """The source file of module ``parts`` (a list of names) under ``package_dir``, or None."""
    base = os.path.join(package_dir, *parts)
    for cand in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(cand):
            return cand
    return None


def _imports(path, package_dir):
    """Package source files that the module at ``path`` imports (relative or absolute)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    here = os.path.relpath(os.path.dirname(path), package_dir)
    here_parts = [] if here == "." else here.split(os.sep)
    found = []
    for dots, mod, names in _REL_IMPORT.findall(text):
        up = len(dots) - 1
        if up > len(here_parts):
            continue
        base = here_parts[:len(here_parts) - up] if up else list(here_parts)
        parts = base + [p for p in mod.split(".") if p]
        found.append(_module_file(package_dir, parts))
        if not mod:  # "from . import a, b": each name may be a submodule
            for name in re.findall(r"\w+", names):
                found.append(_module_file(package_dir, parts + [name]))
    for mod in _ABS_IMPORT.findall(text):
        found.append(_module_file(package_dir, [p for p in mod.split(".") if p]))
    return [p for p in found if p is not None]


def kernel_sources(package_dir=_PACKAGE_DIR):
    """The package's source files that compiled kernels depend on.

    Every module whose source contains ``jit(... cache=True`` (an
    ``@njit(cache=True)`` kernel), and every module of the package they import, transitively: a
    kernel's globals can only come from its module's namespace.

    Parameters
    ----------
    package_dir : str
        The package folder (default: this installed package).

    Returns
    -------
    list of str
        Absolute paths, sorted.
    """
    todo = []
    for root, dirs, files in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as f:
                    if _KERNEL_MARK.search(f.read()):
                        todo.append(os.path.abspath(path))
    seen = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        todo.extend(os.path.abspath(p) for p in _imports(path, package_dir) if p not in seen)
    return sorted(seen)


def cache_key(package_dir=_PACKAGE_DIR, version=None):
    """The cache's sub-directory name: ``<version>-<16 hex digits>``.

    The digits hash the contents (and package-relative names) of
    :func:`kernel_sources`, the numba version, the Python version and the machine.

    Parameters
    ----------
    package_dir : str
    version : str or None
        The package version (default: ``linearnets.__version__`` as read from
        the package's ``__init__.py``).

    Returns
    -------
    str
    """
    if version is None:
        version = _read_version(package_dir)
    h = hashlib.sha256()
    for path in kernel_sources(package_dir):
        h.update(os.path.relpath(path, package_dir).replace(os.sep, "/").encode())
        h.update(b"\0")
        with open(path, "rb") as f:
            h.update(f.read())
        h.update(b"\0")
    h.update(_numba_version().encode())
    h.update(sys.version.encode())
    h.update(os.uname().machine.encode() if hasattr(os, "uname") else b"")
    return f"{version}-{h.hexdigest()[:16]}"


def _read_version(package_dir):
    try:
        with open(os.path.join(package_dir, "__init__.py"), encoding="utf-8") as f:
            m = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", f.read(), re.M)
        return m.group(1) if m else "0"
    except OSError:
        return "0"


def _numba_version():
    try:
        from importlib.metadata import version
        return version("numba")
    except Exception:
        return "unknown"


def _writable(path):
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
        return True
    except OSError:
        return False


def _candidates(key):
    env = os.environ.get(ENV_VAR)
    if env:
        yield os.path.join(os.path.abspath(os.path.expanduser(env)), key), True
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    yield os.path.join(xdg, "linearnets", "numba", key), True
    try:
        user = getpass.getuser()
    except Exception:
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    yield os.path.join(tempfile.gettempdir(), f"linearnets-{user}", "numba", key), True


def _prune(path):
    """Remove sibling key directories unused for :data:`_STALE_SECONDS` (best effort)."""
    import shutil
    parent = os.path.dirname(path)
    now = time.time()
    try:
        os.utime(path)
        entries = os.listdir(parent)
    except OSError:
        return
    for name in entries:
        other = os.path.join(parent, name)
        if other == path or not os.path.isdir(other):
            continue
        try:
            if now - os.stat(other).st_mtime > _STALE_SECONDS:
                shutil.rmtree(other, ignore_errors=True)
        except OSError:
            pass


def cache_dir():
    """The directory numba's cache files of this package go to (created on first call).

    Returns
    -------
    str or None
        None when no candidate directory is writable; numba then falls back to
        its own locators.
    """
    if _state["dir"] is None:
        key = cache_key()
        for path, keyed in _candidates(key):
            if _writable(path):
                if keyed:
                    _prune(path)
                _state["dir"] = path
                break
        else:
            _state["dir"] = ""
    return _state["dir"] or None


def _make_locator(caching):
    base = caching._CacheLocator
    mixin = caching._SourceFileBackedLocatorMixin

    class LinearnetsCacheLocator(mixin, base):
        """numba cache locator for functions defined in this package's files."""

        def __init__(self, py_func, py_file, root):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            rel = os.path.relpath(os.path.dirname(os.path.abspath(py_file)), _PACKAGE_DIR)
            self._cache_path = os.path.join(root, "" if rel == "." else rel)

        def get_cache_path(self):
            return self._cache_path

        @classmethod
        def from_function(cls, py_func, py_file):
            path = os.path.abspath(py_file)
            if not path.startswith(_PACKAGE_DIR + os.sep) or not os.path.exists(path):
                return None
            root = cache_dir()
            if root is None:
                return None
            self = cls(py_func, py_file, root)
            try:
                self.ensure_cache_path()
            except OSError:
                return None
            return self

    return LinearnetsCacheLocator


def compile_count():
    """How many of this package's kernels this process has compiled (not loaded from cache)."""
    return _state["compiles"]


def set_compile_notice(enabled):
    """Turn the one-line stderr notice printed at the first kernel compilation on or off.

    Parameters
    ----------
    enabled : bool

    Returns
    -------
    bool
        The previous setting.
    """
    old = _state["notice"]
    _state["notice"] = bool(enabled)
    return old


def _is_ours(dispatcher):
    func = getattr(dispatcher, "py_func", None)
    module = getattr(func, "__module__", "") or ""
    return module == "linearnets" or module.startswith("linearnets.")


def _register_notice(event):
    class CompileNotice(event.Listener):
        """Counts this package's kernel compilations; prints one notice at the first."""

        def on_start(self, ev):
            data = ev.data or {}
            if not _is_ours(data.get("dispatcher")):
                return
            _state["compiles"] += 1
            if _state["notice"] and not _state["noticed"]:
                _state["noticed"] = True
                try:
                    sys.stderr.write(_NOTICE.format(dir=cache_dir() or "numba's default cache"))
                    sys.stderr.flush()
                except Exception:  # a closed or missing stderr must not break a run
                    pass

        def on_end(self, ev):
            pass

    event.register("numba:compile", CompileNotice())


def install():
    """Register the package's cache locator with numba (idempotent; no-op without numba)."""
    if _state["installed"]:
        return
    _state["installed"] = True
    if importlib.util.find_spec("numba") is None:
        return
    from numba.core import caching
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")
    classes = impl._locator_classes
    if not any(getattr(c, "__name__", "") == "LinearnetsCacheLocator" for c in classes):
        classes.insert(0, _make_locator(caching))
    try:
        from numba.core import event
    except ImportError:  # numba without the event API: no notice
        return
    _register_notice(event)
