"""The package's version: one source, the ``version`` of ``setup.cfg``'s ``[metadata]``.

At run time it is read from the installed distribution's metadata
(:func:`importlib.metadata.version`); a source tree used without an install (on
``sys.path`` only) reads it from the ``setup.cfg`` beside the package.
"""
from __future__ import annotations

import configparser
import os
from importlib import metadata

__all__ = ["__version__"]


def _version():
    try:
        return metadata.version("linearnets")
    except metadata.PackageNotFoundError:
        cfg = configparser.ConfigParser()
        cfg.read(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "setup.cfg"))
        if cfg.get("metadata", "name", fallback="") == "linearnets":
            return cfg.get("metadata", "version", fallback="0+unknown")
        return "0+unknown"


__version__ = _version()
