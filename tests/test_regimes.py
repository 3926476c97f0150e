"""Regime diagnostics: kernel drift, RD per layer, RD slopes, condensation, laziness, phase coordinates."""
import numpy as np
import pytest

import linearnets as ln
from linearnets import regimes


def test_kernel_drift_single_and_path():
    K0 = np.eye(3)
    K = np.stack([np.eye(3), 2 * np.eye(3), np.eye(3) + np.ones((3, 3))])
    np.testing.assert_allclose(regimes.kernel_drift(K0, K), [0.0, 1.0, np.sqrt(9 / 3)])
    assert regimes.kernel_drift(K0, 3 * K0) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="K must have shape"):
        regimes.kernel_drift(K0, np.ones((2, 2)))
    with pytest.raises(ValueError, match="K0"):
        regimes.kernel_drift(np.zeros((2, 2)), np.ones((2, 2)))


def test_relative_change_with_bias_and_path():
    W0 = [np.ones((2, 3)), np.ones((1, 2))]
    b0 = [np.ones(2)]
    W = [np.ones((2, 3)) * 2, np.ones((1, 2))]
    rd = regimes.relative_change(W0, W, b0, [np.ones(2)])
    # layer 1 = (W, b): |(1,1,1,0)| per row vs |(1,1,1,1)|
    np.testing.assert_allclose(rd, [np.sqrt(6 / 8), 0.0])
    path = [np.stack([W0[0], W[0]]), np.stack([W0[1], W[1]])]
    np.testing.assert_allclose(regimes.relative_change(W0, path), [[0, 0], [1.0, 0]])


def test_rd_slope_labels():
    rng = np.random.default_rng(0)
    m = np.array([100.0, 200.0, 400.0, 800.0])
    for p, label in ((-0.5, "linear"), (0.0, "critical"), (0.4, "condensed")):
        noise = 0.02 * rng.standard_normal((4, 6))
        noise -= noise.mean(axis=1, keepdims=True)      # the seeds' slopes average to exactly p
        rd = m[:, None] ** p * np.exp(noise)
        r = regimes.rd_slope(m, rd)
        assert r["label"] == label, r
        assert abs(r["slope"] - p) < 1e-12 and r["stderr"] > 0
    with pytest.raises(ValueError, match="rd"):
        regimes.rd_slope(m, np.ones((3, 2)))


def test_condensation_counts_orientations():
    rng = np.random.default_rng(1)
    dirs = np.array([[1.0, 0, 0], [0, 1.0, 0], [-1.0, 0, 0]])
    W = np.repeat(dirs, 5, axis=0) * rng.uniform(0.5, 2, (15, 1)) + 1e-3 * rng.standard_normal((15, 3))
    cos, n = regimes.condensation(W)
    assert n == 3 and cos.shape == (15, 15)
    _, n = regimes.condensation(rng.standard_normal((20, 5)))
    assert n == 20
    # the bias is part of the input weight: same w, opposite biases -> two orientations
    _, n = regimes.condensation(np.ones((2, 2)), b=np.array([1.0, -1.0]))
    assert n == 2


def test_condensation_does_not_chain_spread_units_in_two_dimensions():
    # 1-d inputs with a bias: u_k on a circle.  400 spread-out units must not read as one
    # orientation (single linkage chains them); three tight groups read as three.
    rng = np.random.default_rng(0)
    th = rng.uniform(0, 2 * np.pi, 400)
    _, n_spread = regimes.condensation(np.cos(th)[:, None], b=np.sin(th))
    eps = regimes.CONDENSE_EPS
    assert n_spread >= 0.5 * 2 * np.pi / np.sqrt(2 * eps)
    th = np.repeat([0.3, 2.0, 4.0], 100) + 1e-3 * rng.standard_normal(300)
    _, n = regimes.condensation(np.cos(th)[:, None], b=np.sin(th))
    assert n == 3


def _complete_linkage_count(U, eps):
    # the reference: complete-linkage clusters of the cosine matrix at distance eps
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    U = U / np.linalg.norm(U, axis=1)[:, None]
    dist = np.clip(1.0 - U @ U.T, 0.0, 2.0)
    dist = 0.5 * (dist + dist.T)
    np.fill_diagonal(dist, 0.0)
    return np.unique(fcluster(linkage(squareform(dist, checks=False), method="complete"),
                              t=eps, criterion="distance")).size


@pytest.mark.parametrize("d", [2, 3, 5])
def test_condensation_counts_separated_groups_as_complete_linkage(d):
    # groups of angular radius ~0.05 rad whose centres are > 0.6 rad apart: complete
    # linkage at eps = 0.02 (theta = 0.2 rad) and the count agree on the number of groups
    rng = np.random.default_rng(10 + d)
    for _ in range(6):
        k = int(rng.integers(1, 9))
        while True:
            C = rng.standard_normal((k, d))
            C /= np.linalg.norm(C, axis=1)[:, None]
            if k == 1 or np.max(C @ C.T - 2 * np.eye(k)) < np.cos(0.6):
                break
        U = C[rng.integers(0, k, 200)] * rng.uniform(0.5, 2.0, (200, 1))
        U += 0.02 / np.sqrt(d) * np.linalg.norm(U, axis=1)[:, None] * rng.standard_normal((200, d))
        n_ref = _complete_linkage_count(U, regimes.CONDENSE_EPS)
        _, n = regimes.condensation(U, cosines=False)
        assert n == n_ref == np.unique(np.argmax(U @ C.T, axis=1)).size


def _fewest_arcs_brute(angles, theta):
    # greedy covering from every point (each optimal cover has an arc starting at a point)
    a = np.sort(np.mod(angles, 2 * np.pi))
    n, best = a.size, a.size
    for s in range(n):
        rel = np.sort(np.mod(a - a[s], 2 * np.pi))
        count, i = 0, 0
        while i < n:
            count += 1
            i = int(np.searchsorted(rel, rel[i] + theta, side="right"))
        best = min(best, count)
    return best


def test_condensation_on_the_circle_is_the_fewest_groups():
    # every pair within theta <=> an arc of length theta: the count is the exact minimum,
    # checked against greedy covering from every start, sparse to dense, with clusters
    rng = np.random.default_rng(3)
    eps = regimes.CONDENSE_EPS
    theta = np.arccos(1 - eps)
    for n in (2, 5, 20, 60, 150):
        for kind in ("uniform", "clustered"):
            if kind == "uniform":
                th = rng.uniform(0, 2 * np.pi, n)
            else:
                th = rng.uniform(0, 2 * np.pi, 4)[rng.integers(0, 4, n)] + 0.15 * rng.standard_normal(n)
            r = rng.uniform(0.1, 3.0, n)
            _, got = regimes.condensation((r * np.cos(th))[:, None], b=r * np.sin(th), cosines=False)
            assert got == _fewest_arcs_brute(th, theta), (n, kind)
    # a larger eps, and units exactly on the arc ends
    th = np.array([0.0, 0.5, 1.0, 1.5, 2.0])
    _, got = regimes.condensation(np.column_stack([np.cos(th), np.sin(th)]), eps=1 - np.cos(0.5 + 1e-9),
                                  cosines=False)
    assert got == 3


def test_condensation_never_forms_an_n_by_n_array():
    # 10^6 units: an (n, n) float64 array would need 8 TB
    rng = np.random.default_rng(4)
    n = 1_000_000
    th = np.repeat([0.3, 2.0, 4.0], n // 3 + 1)[:n] + 1e-3 * rng.standard_normal(n)
    cos, k = regimes.condensation(np.cos(th)[:, None], b=np.sin(th), cosines=False)
    assert cos is None and k == 3
    C = np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, -1.0], [0.6, 0.8, 0]])
    U = C[rng.integers(0, 4, n)] + 1e-3 * rng.standard_normal((n, 3))
    cos, k = regimes.condensation(U[:, :2], b=U[:, 2], cosines=False)
    assert cos is None and k == 4


def test_condensation_cosines_and_bad_input():
    W = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 2.0]])
    cos, n = regimes.condensation(W)
    assert n == 2 and np.isnan(cos[1]).all() and np.isnan(cos[:, 1]).all()
    np.testing.assert_allclose(cos[np.ix_([0, 2], [0, 2])], np.eye(2))
    assert regimes.condensation(np.zeros((3, 2)), cosines=False) == (None, 0)
    for eps in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="eps"):
            regimes.condensation(W, eps=eps)
    with pytest.raises(ValueError, match="b must have shape"):
        regimes.condensation(W, b=np.ones(2))


def test_crossing_time_interpolates_linearly_or_as_a_power_law():
    t = np.array([0.0, 1.0, 2.0, 4.0])
    assert regimes.crossing_time(t, 3.0 * t + 1.0, 8.5) == pytest.approx(2.5, rel=1e-15)
    # decreasing curves through their negative: the loss falls to 0.9 L(0)
    loss = np.array([1.0, 0.95, 0.85, 0.5])
    assert regimes.crossing_time(t, -loss, -0.9) == pytest.approx(1.5, rel=1e-15)
    # a power law y = 2 t^1.7 is exact in log-log, not in linear interpolation
    t = np.geomspace(1e-3, 1e3, 13)
    y = 2.0 * t ** 1.7
    t_true = (5.0 / 2.0) ** (1 / 1.7)
    assert regimes.crossing_time(t, y, 5.0, log=True) == pytest.approx(t_true, rel=1e-13)
    assert abs(regimes.crossing_time(t, y, 5.0) / t_true - 1) > 1e-2
    # a bracketing value at 0 cannot be logged: linear there
    assert regimes.crossing_time([1.0, 2.0], [0.0, 2.0], 1.0, log=True) == pytest.approx(1.5)
    assert np.isnan(regimes.crossing_time(t, y, 1e9))          # never reached
    assert np.isnan(regimes.crossing_time(t, y, 1e-9))         # already above at the first sample
    with pytest.raises(ValueError, match="same length"):
        regimes.crossing_time(t, y[:-1], 1.0)
    with pytest.raises(ValueError, match="level"):
        regimes.crossing_time(t, y, np.nan)


def test_output_variance_and_scaling_exponent():
    rng = np.random.default_rng(2)
    F = rng.standard_normal((2000, 4)) * 3.0
    assert regimes.output_variance(F) == pytest.approx(9.0, rel=0.1)
    assert regimes.scaling_exponent([1, 2, 4], [1, 0.5, 0.25]) == pytest.approx(-1.0)


def _two_layer_jacobian(W1, W2, X):
    # f_mu = W2 W1 x_mu (C = 1): d f / d W1 = W2^T x^T, d f / d W2 = (W1 x)^T
    return np.concatenate([np.einsum("n,pd->pnd", W2[0], X).reshape(len(X), -1), X @ W1.T], axis=1)


def test_laziness_ratio_scales_as_sigma_to_minus_L():
    X = ln.whitened_inputs(20, 6, seed=0)
    y = X @ np.ones(6) / np.sqrt(6)
    ratios = []
    sigmas = np.array([0.1, 0.05, 0.025])
    for s in sigmas:
        w = ln.init_network((6, 8, 1), s, seed=3)
        t = np.linspace(0.0, 0.2, 5)
        tr = ln.gradient_flow(w, X, y, t, rtol=1e-11, atol=1e-15, record=("weights",))
        G = np.stack([_two_layer_jacobian(tr.weights_t[0][k], tr.weights_t[1][k], X) for k in range(5)])
        ratios.append(np.median(regimes.laziness_ratio(t, G, tr.loss)))
    slope = np.polyfit(np.log(sigmas), np.log(ratios), 1)[0]
    assert abs(slope + 2.0) < 0.2, (ratios, slope)


def test_phase_coordinates_two_and_three_layers():
    ntk = regimes.phase_coordinates(0.5, [0.0, 0.0])
    assert ntk == {"gamma": 0.5, "gamma_prime": 0.0, "regime": "linear"}
    assert regimes.phase_coordinates(1.0, [0.0, 0.0])["regime"] == "critical"        # mean field
    assert regimes.phase_coordinates(0.0, [-0.5, -0.5])["regime"] == "critical"      # Xavier
    assert regimes.phase_coordinates(2.0, [0.0, 0.0])["regime"] == "condensed"
    assert regimes.phase_coordinates(2.0, [0.0, 1.5])["regime"] == "linear"          # gamma' > gamma - 1
    assert regimes.phase_coordinates(3.0, [0.0, 1.0])["regime"] == "critical"        # gamma = 2, gamma' = 1
    three = regimes.phase_coordinates(1.0, [-0.5, -0.5, -0.5])
    assert three["gamma1"] == 0.0 and three["reconstruction"]
    with pytest.raises(ValueError, match="beta_exponents"):
        regimes.phase_coordinates(1.0, [0.0])


def test_variance_slope_recovers_the_exponent_and_its_error():
    # F ~ N(0, 1/h) independently per seed: slope -1; the jackknife error of log s^2 for
    # Gaussian data is sqrt(2/(n-1)) per width, so the slope's error is that / sqrt(sum xc^2)
    rng = np.random.default_rng(5)
    widths = np.array([8, 16, 32, 64])
    n = 400
    fit = regimes.variance_slope(widths, [rng.standard_normal((n, 1)) / np.sqrt(h) for h in widths])
    xc = np.log(widths) - np.log(widths).mean()
    se_theory = np.sqrt(2 / (n - 1)) / np.sqrt(xc @ xc)
    assert fit["stderr"] == pytest.approx(se_theory, rel=0.25)
    assert abs(fit["slope"] + 1.0) <= 3 * fit["stderr"]
    np.testing.assert_allclose(fit["log_stderr"], np.sqrt(2 / (n - 1)), rtol=0.25)
    # flat in width: slope 0 within the error, and far from -1
    flat = regimes.variance_slope(widths, [rng.standard_normal((n, 3)) for _ in widths])
    assert abs(flat["slope"]) <= 3 * flat["stderr"] and abs(flat["slope"] + 1) > 10 * flat["stderr"]
    assert fit["variance"].shape == (4,) and ln.variance_slope is regimes.variance_slope


def test_variance_slope_bad_input():
    F = np.random.default_rng(0).standard_normal((5, 2))
    with pytest.raises(ValueError, match="outputs"):
        regimes.variance_slope([1, 2], [F])
    with pytest.raises(ValueError, match="outputs\\[1\\]"):
        regimes.variance_slope([1, 2], [F, F[:2]])
    with pytest.raises(ValueError, match="outputs\\[0\\]"):
        regimes.variance_slope([1, 2], [np.ones((5, 2)), F])
    with pytest.raises(ValueError, match="widths"):
        regimes.variance_slope([1, -2], [F, F])
    with pytest.raises(ValueError, match="widths"):
        regimes.variance_slope([2, 2], [F, F])


def test_phase_coordinates_two_layer_order_is_output_then_input():
    # Luo et al.'s beta_1 is the output layer: small input weights (m^-1.1) under O(m^-0.3)
    # output weights condense; the same exponents swapped are linear
    r = regimes.phase_coordinates(0.0, [-0.3, -1.1])
    assert r["regime"] == "condensed" and abs(r["gamma_prime"] + 0.8) < 1e-12
    assert regimes.phase_coordinates(0.0, [-1.1, -0.3])["regime"] == "linear"
