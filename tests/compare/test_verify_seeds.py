"""``verify`` holds on every seed: each row passes for seeds 0-9 at its default size.

The cheap rows (each well under a second or two) run over every seed in the default
suite; every other registered row (the ensembles, the diagonal network's stiff runs, the
ReLU kernel machines, and any row added later) runs over the seeds in the slow test.
"""
import pytest

from linearnets import compare

SEEDS = tuple(range(10))

#: The rows cheap enough to run for ten seeds in the default suite (about a minute in all).
CHEAP = ("learning_curve", "phase_one", "initial_moments", "mode_strengths", "final_ntk", "silent_alignment",
         "silent_alignment_L3", "kernel_gap", "kernel_path", "unwhitened_phase1", "path_ntk",
         "intermediate_kernels", "transfer", "finite_sigma_ntk", "lambda_balanced", "balanced_ntk_drift",
         "lazy_limit", "lazy_limit_relu", "single_neuron", "laziness_ratio", "laziness_ratio_relu",
         "gd_mode_map", "gd_stability", "catapult", "modified_flow")


def _check_seed(names, seed):
    rows = compare.run_checks(names, seed=seed)
    bad = [f"{r.name}: {r.status} " + (r.exception or f"error {r.error:.4g} > tolerance {r.tolerance:.4g}; {r.notes}")
           for r in rows if not r.passed]
    assert not bad, f"seed {seed}:\n" + "\n".join(bad)
    # every row ran on the seed asked for
    assert all(r.params.get("seed", seed) == seed for r in rows)


def test_the_cheap_rows_are_registered():
    assert set(CHEAP) <= set(compare.CHECKS)


@pytest.mark.parametrize("seed", SEEDS)
def test_cheap_rows_pass_on_every_seed(seed):
    _check_seed(CHEAP, seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_every_other_row_passes_on_every_seed(seed):
    _check_seed([n for n in compare.CHECKS if n not in CHEAP], seed)
