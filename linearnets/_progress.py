"""The progress bar of a long run: a tqdm bar over a run's clock (flow time or steps), fed
by the loops where they return to Python (docs/simulator.md, "Long runs")."""
from __future__ import annotations

import math
import sys
import time

import numpy as np

__all__ = ["Progress", "check_progress", "progress_for", "AUTO_AFTER", "LOG_DECADES",
           "REDRAW_EVERY"]

#: ``progress=None`` shows the bar once a run has lasted this many seconds (on a terminal).
AUTO_AFTER = 2.0
#: Output times spanning at least this many decades put the bar on a log scale of time.
LOG_DECADES = 3.0
#: Seconds between two redraws of the bar.
REDRAW_EVERY = 0.1


def check_progress(progress):
    """``progress`` as None, True or False (``ValueError`` naming progress otherwise)."""
    if progress is None or isinstance(progress, (bool, np.bool_)):
        return None if progress is None else bool(progress)
    raise ValueError(f"progress must be None (automatic), True or False, got {progress!r}")


class Progress:
    """A bar over the clocks (flow time, or steps) of ``members`` runs from 0 to ``end``,
    at the mean of their positions: linear in the clock, or ``log(c / log_from) / log(end /
    log_from)`` from a clock ``log_from`` > 0 (times spanning decades).  ``label`` names the
    clock (``"t"``, ``"step"``), ``desc`` the run.  Shown from the start with ``show`` True,
    after :data:`AUTO_AFTER` seconds with None; :meth:`update` redraws at most every
    :data:`REDRAW_EVERY` seconds, so that a loop may call it at every step."""

    def __init__(self, show, end, *, log_from=None, label="t", desc="gradient flow",
                 members=1):
        self.end = float(end)
        self.log_from, self.label, self.desc = log_from, label, desc
        self.clock = [0.0] * int(members)
        self.t0 = self.last = time.monotonic()
        self.bar = None
        if show:
            self._open()

    def fraction(self, c):
        """The bar's position in [0, 1] at clock ``c``."""
        if self.log_from is not None:
            lo = self.log_from
            return min(1.0, max(0.0, math.log(max(c, lo) / lo) / math.log(self.end / lo)))
        return 1.0 if self.end <= 0 else min(1.0, max(0.0, c / self.end))

    def update(self, c, member=0):
        """The clock of ``member`` is now ``c``: redraw if the last redraw is old enough."""
        now = time.monotonic()
        self.clock[member] = c
        if now - self.last < REDRAW_EVERY:
            return
        self.last = now
        if self.bar is None:
            if now - self.t0 < AUTO_AFTER:
                return
            self._open()
        self._draw()

    def _open(self):
        from tqdm.auto import tqdm
        log = ", log scale" if self.log_from is not None else ""
        self._suffix = f" / {self.end:.4g}{log}"
        self.bar = tqdm(total=1000, leave=True, file=sys.stderr,
                        bar_format="{desc} {percentage:3.0f}%|{bar}| [{elapsed}]")
        self._draw()

    def _draw(self):
        bar = self.bar
        fr = sum(self.fraction(c) for c in self.clock) / len(self.clock)
        bar.n = int(round(1000 * fr))
        bar.set_description_str(f"{self.desc}, {self.label} = {min(self.clock):.4g}"
                                f"{self._suffix}:", refresh=False)
        bar.refresh()

    def update_all(self, c):
        """Every member's clock is now ``c`` (a finished run), drawn at once."""
        self.clock = [c] * len(self.clock)
        if self.bar is not None:
            self._draw()

    def close(self):
        """Draw the last state and close the bar (if it was shown)."""
        if self.bar is not None:
            self._draw()
            self.bar.close()
            self.bar = None


def progress_for(progress, outputs, members=1, label="t", desc="gradient flow"):
    """The :class:`Progress` of a run from 0 onto the clocks ``outputs`` (output times, or
    steps; on a log scale where the positive ones span :data:`LOG_DECADES` decades) for the
    setting ``progress`` (checked by :func:`check_progress`), or None where no bar can show:
    ``False``, or None with stderr not a terminal (then the loops skip it, at no cost)."""
    show = check_progress(progress)
    if show is False or (show is None and not _stderr_is_terminal()):
        return None
    outputs = np.asarray(outputs, dtype=np.float64)
    end = float(outputs[-1])
    pos = outputs[outputs > 0]
    lo = float(pos.min()) if pos.size else 0.0
    log_from = lo if pos.size and math.log10(end / lo) >= LOG_DECADES else None
    return Progress(show, end, log_from=log_from, members=members, label=label, desc=desc)


def _stderr_is_terminal():
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):
        return False
