"""Where numba keeps the compiled kernels of this package: a keyed user cache directory.

The package's kernels are decorated with this module's :func:`njit`, not numba's.
With ``cache=True`` it sets ``numba.config.CACHE_DIR`` (numba's public setting, the
one ``NUMBA_CACHE_DIR`` sets) to the kernel's cache directory while numba decorates
the kernel, and restores it at once: numba reads it at decoration time to place the
kernel's ``*.nbi`` / ``*.nbc`` files, so the caching of the user's own numba code (and
``NUMBA_CACHE_DIR``) is left alone, and nothing is written into the package folders
(inside an installed package, ``__pycache__`` files that pip's uninstall leaves behind
import as an empty namespace package that hides a later install). The directory is

    ``<root>/<version>-<16 hex digits>``, with ``<root>`` =
    ``$LINEARNETS_CACHE_DIR``                     if that variable is set, else
    ``$XDG_CACHE_HOME/linearnets/numba``          (``~/.cache`` without XDG_CACHE_HOME),

falling back to ``<tempdir>/linearnets-<user>/numba`` where that is not writable. The
digits hash the sources of the kernel's module and of every package module it imports
(transitively), the numba and Python versions and the machine. The hash matters: numba
checks only the source file of the function it loads, so a kernel whose callee in
another file changed would otherwise load stale machine code.

numba keeps one index per function (signature -> data file); two processes that compile
different signatures of one function at once read the same index, pick the same data
file, and leave an index entry pointing at the other signature's machine code (numba
issues #4807, #10128). :func:`lock_cache` serialises a dispatcher's index updates and
loads across processes with an exclusive ``flock`` on ``<index>.lock``.  numba has no
public hook for this (its public cache settings are ``cache=True`` and
``numba.config.CACHE_DIR``, both used above), so :func:`lock_cache` wraps the private
index object's ``save``/``load``, and leaves a dispatcher alone where that object is not
there; ``setup.cfg`` pins numba below the first minor release not tested with it (0.69).

A complete cache is marked: ``python -m linearnets warmup`` ends by writing
:func:`warm_marker`, which lists the digests of every source file the kernels of
:data:`KERNEL_MODULES` depend on, with the numba and Python versions and the machine;
:func:`is_warm` compares them with the files.  ``backend="auto"``
reads it (:mod:`linearnets._jit`): without it, a call runs on numpy while one background
warm-up (:func:`warmup_lock` keeps it to one per cache) fills the cache.
"""
from __future__ import annotations

import ast
import contextlib
import functools
import getpass
import hashlib
import os
import shutil
import sys
import tempfile
import threading
import time

from ._version import __version__

try:
    import fcntl
except ImportError:  # not POSIX: numba's own (unlocked) cache files
    fcntl = None

__all__ = ["ENV_VAR", "njit", "cache_dir", "cache_key", "kernel_sources", "kernel_modules", "package_imports",
           "install", "compile_count", "set_compile_notice", "lock_cache", "KERNEL_MODULES", "warm_marker",
           "is_warm", "mark_warm", "warmup_failed", "warmup_lock"]

#: Environment variable naming the cache's root directory (the key is appended).
ENV_VAR = "LINEARNETS_CACHE_DIR"

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
#: The modules that define kernels with :func:`njit` (:func:`kernel_modules` finds them, in
#: seconds; tests/test_jit.py checks this list against it).
KERNEL_MODULES = ("sim.methods._descent_kernels", "sim.methods._erk_kernels",
                  "sim.methods._rosw_kernels", "sim.models._linear_kernels",
                  "sim.models._mlp_kernels", "theory._infinite_width_kernels", "theory._kernels")
#: Key directories not used for this long are removed (best effort) when another key is set up.
_STALE_SECONDS = 30 * 24 * 3600
_LOCK = threading.Lock()
_state = {"root": None, "notice": True, "noticed": False, "compiles": 0, "warm": False}
_NOTICE = ("linearnets: compiling numba kernels for first use (once; later runs load them "
           "from {dir}). `python -m linearnets warmup` compiles them all ahead of time.\n")


def njit(*args, **options):
    """``numba.njit`` for this package's kernels: with ``cache=True`` the cache goes to :func:`cache_dir`.

    Used as ``@njit(cache=True, ...)`` (or ``@njit``, or with signatures) exactly like
    numba's; ``numba.config.CACHE_DIR`` is the kernel's keyed directory only while numba
    decorates it.
    """
    import numba

    bare = len(args) == 1 and callable(args[0]) and not options
    sigs = () if bare else args

    def decorate(fn):
        path = _key_dir(fn.__code__.co_filename) if options.get("cache") else None
        if path is None:
            return numba.njit(*sigs, **options)(fn)
        with _LOCK:
            old = numba.config.CACHE_DIR
            numba.config.CACHE_DIR = path
            try:
                return lock_cache(numba.njit(*sigs, **options)(fn))
            finally:
                numba.config.CACHE_DIR = old

    return decorate(args[0]) if bare else decorate


def lock_cache(dispatcher):
    """Make ``dispatcher``'s cache (a ``cache=True`` numba dispatcher) save and load each entry
    under an exclusive file lock ``<index>.nbi.lock``, so that processes compiling its
    signatures at once never write one index at the same time (module docstring).

    Returns the dispatcher; unchanged without ``fcntl`` or a cache.
    """
    index = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
    if fcntl is None or not hasattr(index, "_index_path") or getattr(index, "_locked", False):
        return dispatcher
    for name in ("save", "load"):
        setattr(index, name, _under_lock(getattr(index, name), index._index_path + ".lock"))
    index._locked = True
    return dispatcher


def _under_lock(method, lock_path):
    @functools.wraps(method)
    def call(*args):
        with _file_lock(lock_path):
            return method(*args)
    return call


@contextlib.contextmanager
def _file_lock(path):
    """Hold ``flock(LOCK_EX)`` on ``path`` (created); without the directory, no lock."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def package_imports(path, package_dir=_PACKAGE_DIR):
    """The package's source files that the module at ``path`` imports, anywhere in it.

    Relative imports, and absolute ones of ``linearnets``; ``from X import a`` counts
    ``X`` and, where ``X.a`` is a module, ``X.a`` (a name that is not a module resolves
    to ``X`` itself: ``from .. import name`` imports the package's ``__init__``).

    Returns
    -------
    list of (str, ast.Import or ast.ImportFrom)
        (absolute path of the imported module, the import statement) per imported module.
    """
    path = os.path.abspath(path)
    here = os.path.relpath(os.path.dirname(path), package_dir)
    here = [] if here == "." else here.split(os.sep)
    top = os.path.basename(package_dir)
    found = []
    for node in ast.walk(_parse(path)):
        if isinstance(node, ast.Import):
            targets = [a.name.split(".")[1:] for a in node.names if a.name.split(".")[0] == top]
        elif isinstance(node, ast.ImportFrom):
            mod = (node.module or "").split(".") if node.module else []
            if node.level == 0:
                if not mod or mod[0] != top:
                    continue
                base = mod[1:]
            elif node.level - 1 > len(here):
                continue
            else:
                base = here[:len(here) - node.level + 1] + mod
            subs = [base + [a.name] for a in node.names if _module_file(package_dir, base + [a.name])]
            targets = subs + ([base] if len(subs) < len(node.names) else [])
        else:
            continue
        found += [(f, node) for f in map(functools.partial(_module_file, package_dir), targets) if f]
    return found


def kernel_sources(path, package_dir=_PACKAGE_DIR):
    """The source files a kernel module's compiled code depends on: itself and, transitively,
    every package module it imports (a kernel's globals can only come from there).

    Returns
    -------
    list of str
        Absolute paths, sorted.
    """
    todo, seen = [os.path.abspath(path)], set()
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo += [f for f, _ in package_imports(p, package_dir) if f not in seen]
    return sorted(seen)


def kernel_modules(package_dir=_PACKAGE_DIR):
    """Dotted names (below the package) of the modules that define kernels with :func:`njit`."""
    me = os.path.join(package_dir, "_numba_cache.py")
    names = []
    for root, dirs, files in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        for name in sorted(files):
            path = os.path.join(root, name)
            if name.endswith(".py") and any(f == me and any(a.name == "njit" for a in node.names)
                                            for f, node in package_imports(path, package_dir)):
                rel = os.path.relpath(path, package_dir)[:-3].replace(os.sep, ".")
                names.append(rel[:-len(".__init__")] if rel.endswith(".__init__") else rel)
    return names


def cache_key(path, package_dir=_PACKAGE_DIR, version=None):
    """The cache sub-directory of the kernels defined in ``path``: ``<version>-<16 hex digits>``.

    The digits hash the package-relative names and contents of :func:`kernel_sources`,
    the numba and Python versions and the machine; ``version`` defaults to the package's.
    """
    import numba

    h = hashlib.sha256()
    for src in kernel_sources(path, package_dir):
        h.update(os.path.relpath(src, package_dir).replace(os.sep, "/").encode() + b"\0")
        with open(src, "rb") as f:
            h.update(f.read() + b"\0")
    h.update(f"{numba.__version__}\0{sys.version}\0{os.uname().machine if hasattr(os, 'uname') else ''}".encode())
    return f"{version or __version__}-{h.hexdigest()[:16]}"


def _kernel_files():
    """Every source file the kernels of :data:`KERNEL_MODULES` depend on (sorted)."""
    return sorted({f for m in KERNEL_MODULES
                   for f in kernel_sources(os.path.join(_PACKAGE_DIR, *m.split(".")) + ".py")})


def _fingerprint(files=None):
    """What the compiled kernels depend on: the numba and Python versions, the machine and the
    SHA-256 of each source file of ``files`` (package-relative; default :func:`_kernel_files`)."""
    import numba

    if files is None:
        files = [os.path.relpath(f, _PACKAGE_DIR) for f in _kernel_files()]
    digests = {}
    for rel in files:
        try:
            with open(os.path.join(_PACKAGE_DIR, rel), "rb") as f:
                digests[rel.replace(os.sep, "/")] = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            digests[rel] = None
    return {"numba": numba.__version__, "python": sys.version,
            "machine": os.uname().machine if hasattr(os, "uname") else "", "sources": digests}


def warm_marker():
    """The file that says the cache holds every kernel of this package (written by
    :func:`mark_warm` at the end of a warm-up): ``<root>/warm-<version>-<8 hex digits of the
    package's folder>``, or None without a writable cache root.  It lists what the kernels
    depend on (:func:`_fingerprint`); :func:`is_warm` checks that against the files."""
    root = cache_dir()
    if root is None:
        return None
    where = hashlib.sha256(_PACKAGE_DIR.encode()).hexdigest()[:8]
    return os.path.join(root, f"warm-{__version__}-{where}")


def _matches(path):
    """Whether the JSON file ``path`` holds the fingerprint of the current sources (reads only
    the files it lists: milliseconds, where finding them costs seconds)."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        return {k: saved.get(k) for k in ("numba", "python", "machine", "sources")} == \
            _fingerprint(list(saved["sources"]))
    except (OSError, ValueError, KeyError, TypeError):
        return False


def is_warm():
    """Whether :func:`warm_marker` says the cache is complete for the current sources (once
    True, True for the rest of the process)."""
    if not _state["warm"]:
        marker = warm_marker()
        _state["warm"] = marker is not None and _matches(marker)
    return _state["warm"]


def warmup_failed():
    """Whether a background warm-up of the current sources failed (``<marker>.failed``)."""
    marker = warm_marker()
    return marker is not None and _matches(marker + ".failed")


def mark_warm(info=None, failed=False):
    """Write :func:`warm_marker` (atomically): the fingerprint of the current sources and
    ``info`` (a dict); ``failed=True`` writes ``<marker>.failed`` instead.  Returns the path."""
    import json

    marker = warm_marker()
    if marker is None:
        return None
    marker += ".failed" if failed else ""
    tmp = f"{marker}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(dict(info or {}, time=time.time(), **_fingerprint()), f)
    os.replace(tmp, marker)
    _state["warm"] = _state["warm"] or not failed
    return marker


def warmup_lock(blocking=False):
    """Open and ``flock`` the cache root's ``warmup.lock``; returns its file descriptor (the
    lock lives while any process holds a descriptor of it, and dies with the last one, a
    crash included), or None where another process holds it, there is no cache root, or no
    ``fcntl`` (not POSIX)."""
    root = cache_dir()
    if fcntl is None or root is None:
        return None
    try:
        fd = os.open(os.path.join(root, "warmup.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except OSError:
        os.close(fd)
        return None
    return fd


def cache_dir():
    """The root directory of this package's numba cache (created on first call), or None
    when no candidate is writable (numba then keeps its own default)."""
    if _state["root"] is None:
        _state["root"] = next((p for p in _candidates() if _writable(p)), "")
    return _state["root"] or None


@functools.lru_cache(maxsize=None)
def _key_dir(py_file):
    """The keyed cache directory of the kernels in ``py_file`` (None outside the package)."""
    path, root = os.path.abspath(py_file), cache_dir()
    if root is None or not path.startswith(_PACKAGE_DIR + os.sep) or not os.path.isfile(path):
        return None
    key_dir = os.path.join(root, cache_key(path))
    if not _writable(key_dir):
        return None
    _prune(key_dir)
    return key_dir


@functools.lru_cache(maxsize=None)
def _parse(path):
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), path)


def _module_file(package_dir, parts):
    """The source file of module ``parts`` (a list of names) under ``package_dir``, or None."""
    base = os.path.join(package_dir, *parts)
    return next((c for c in (base + ".py", os.path.join(base, "__init__.py")) if os.path.isfile(c)), None)


def _writable(path):
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
        return True
    except OSError:
        return False


def _candidates():
    env = os.environ.get(ENV_VAR)
    if env:
        yield os.path.abspath(os.path.expanduser(env))
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    yield os.path.join(xdg, "linearnets", "numba")
    try:
        user = getpass.getuser()
    except Exception:  # no user name in this environment
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    yield os.path.join(tempfile.gettempdir(), f"linearnets-{user}", "numba")


def _prune(path):
    """Touch ``path``; remove sibling key directories unused for :data:`_STALE_SECONDS` (best effort)."""
    parent, now = os.path.dirname(path), time.time()
    try:
        os.utime(path)
        others = [os.path.join(parent, n) for n in os.listdir(parent)]
    except OSError:
        return
    for other in others:
        try:
            if other != path and os.path.isdir(other) and now - os.stat(other).st_mtime > _STALE_SECONDS:
                shutil.rmtree(other, ignore_errors=True)
        except OSError:
            pass


def compile_count():
    """How many of this package's kernels this process has compiled (not loaded from cache)."""
    return _state["compiles"]


def set_compile_notice(enabled):
    """Turn the one-line stderr notice at the first kernel compilation on or off; returns the previous setting."""
    old, _state["notice"] = _state["notice"], bool(enabled)
    return old


def install():
    """Count this package's kernel compilations and print one notice at the first (numba's event API; idempotent)."""
    from numba.core import event

    if _state.get("listener"):
        return

    class CompileNotice(event.Listener):
        def on_start(self, ev):
            func = getattr((ev.data or {}).get("dispatcher"), "py_func", None)
            if not (getattr(func, "__module__", "") or "").startswith("linearnets."):
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

    _state["listener"] = CompileNotice()
    event.register("numba:compile", _state["listener"])
