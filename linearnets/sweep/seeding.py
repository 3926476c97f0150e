"""Per-point random streams that depend only on the point, never on order or worker.

Every point of a sweep gets

    SeedSequence(entropy, spawn_key=(seed, stream))

where ``entropy`` is the sweep's root entropy (``[sweep] entropy`` in a spec,
``entropy=`` of :func:`linearnets.sweep`; a fixed default otherwise), ``seed``
is the point's ``seed`` parameter (0 when the grid has no ``seed`` axis) and
``stream`` numbers independent streams inside one point. The numbers drawn are
therefore the same whichever worker runs the point, in whichever order, on the
local pool or on Dask; points that differ only in other parameters (α, width)
share their streams (common random numbers), which is what a phase diagram
compares at fixed seed.

A user function receives its randomness in one of three ways:

- it declares a parameter ``rng``: the engine passes
  ``numpy.random.default_rng(SeedSequence(entropy, spawn_key=(seed, 0)))``;
- it declares ``seed_sequence``: the engine passes
  ``SeedSequence(entropy, spawn_key=(seed,))``, from which
  :func:`stream` derives stream ``k`` as ``spawn_key=(seed, k)``;
- it takes an integer ``seed`` axis and seeds its own generators from it
  (e.g. ``init_network(sizes, sigma, seed=seed)``), which is deterministic too.
"""
from __future__ import annotations

import numpy as np

__all__ = ["point_seed_sequence", "point_rng", "stream"]


def _check_int(v, name):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or int(v) < 0:
        raise ValueError(f"{name} must be a non-negative int, got {v!r}")
    return int(v)


def point_seed_sequence(entropy, seed, stream=0):
    """``SeedSequence(entropy, spawn_key=(seed, stream))``.

    Parameters
    ----------
    entropy : int
        The sweep's root entropy (>= 0).
    seed : int
        The point's seed (>= 0).
    stream : int
        Stream number inside the point (>= 0).

    Returns
    -------
    numpy.random.SeedSequence
    """
    return np.random.SeedSequence(_check_int(entropy, "entropy"),
                                  spawn_key=(_check_int(seed, "seed"), _check_int(stream, "stream")))


def point_rng(entropy, seed, stream=0):
    """A ``numpy.random.Generator`` (PCG64) on :func:`point_seed_sequence`."""
    return np.random.default_rng(point_seed_sequence(entropy, seed, stream))


def stream(seed_sequence, k):
    """Stream ``k`` of the point whose ``seed_sequence`` the engine passed: a Generator.

    ``seed_sequence`` is ``SeedSequence(entropy, spawn_key=(seed,))``; stream
    ``k`` is ``SeedSequence(entropy, spawn_key=(seed, k))``, the same stream
    :func:`point_rng` gives, so stream 0 equals the engine's ``rng``.
    """
    if not isinstance(seed_sequence, np.random.SeedSequence) or len(seed_sequence.spawn_key) != 1:
        raise ValueError("seed_sequence must be the SeedSequence(entropy, spawn_key=(seed,)) the engine passed")
    return np.random.default_rng(np.random.SeedSequence(
        seed_sequence.entropy, spawn_key=tuple(seed_sequence.spawn_key) + (_check_int(k, "k"),)))
