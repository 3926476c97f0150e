"""Write the worked-example notebooks (stored without outputs).

Run ``python notebooks/build_notebooks.py`` after editing the cells below;
``tests/test_notebooks.py`` executes every notebook in smoke mode
(``LINEARNETS_SMOKE=1`` shrinks the sizes) so they cannot rot.

To run a notebook with its outputs from the command line (``nbconvert`` comes
with the dev extra), writing the executed copy elsewhere so that the stored one
stays without outputs::

    jupyter nbconvert --to notebook --execute notebooks/01_closed_forms_tour.ipynb --output-dir /tmp

or open them in Jupyter.
"""
import os

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = os.path.dirname(os.path.abspath(__file__))

SETUP = """\
import os
import numpy as np
import matplotlib
import matplotlib.pyplot as plt
import linearnets as ln

# smoke mode (used by the tests): tiny sizes, same code paths
SMOKE = os.environ.get("LINEARNETS_SMOKE", "0") == "1"
%matplotlib inline"""


def tour():
    return [
        new_markdown_cell("""\
# A tour of the closed forms

`linearnets` ships the closed-form theory of gradient flow in deep linear networks trained
from small initialisation (Atanasov, Bordelon & Pehlevan 2022; Saxe et al. 2014). This
notebook evaluates each closed form and puts it next to one simulation.

Conventions: loss $\\frac{1}{2P}\\sum_\\mu \\|y_\\mu - f(x_\\mu)\\|^2$, whitened inputs
$X^\\top X/P = I$, mode strength $c_\\alpha = u_\\alpha^\\top W_L\\cdots W_1 v_\\alpha$."""),
        new_code_cell(SETUP),
        new_markdown_cell("""\
## Mode dynamics: $\\dot c = \\eta L c^{2-2/L}(s-c)$

For $L=2$ this is the Saxe sigmoid; for $L\\geq3$ the plateau lasts $\\sim\\sigma^{2-L}$.
`mode_strength` is exact at every depth and `mode_time` is its inverse."""),
        new_code_cell("""\
t = np.linspace(0, 40, 400 if not SMOKE else 40)
fig, ax = plt.subplots(figsize=(5, 3.5))
for L in (1, 2, 3, 4):
    ax.plot(t, ln.mode_strength(t, 1.0, 1e-3, depth=L), label=f"L={L}")
ax.set(xlabel="t", ylabel="c(t)", title="mode strength, s=1, c0=1e-3"); ax.legend()
c = ln.mode_strength(7.0, 1.0, 1e-3, depth=3)
print("round trip mode_time(mode_strength(7)) =", float(ln.mode_time(c, 1.0, 1e-3, depth=3)))
print("half times by depth:", [round(float(ln.half_time(1.0, 1e-3, depth=L)), 3) for L in (1, 2, 3, 4)])
print("plateau (small-c0) estimates:", [round(float(ln.plateau_time(1.0, 1e-3, depth=L)), 3) for L in (2, 3, 4)])"""),
        new_markdown_cell("""\
## Phase I: $q(t)$, $r(t)$

Two layers, $q=\\tfrac12(|a|^2+|W\\beta|^2)$ and $r=a\\cdot W\\beta$ grow as
$q_0\\cosh 2\\eta st + r_0\\sinh 2\\eta st$; `qr_full_path` matches phase I to the sigmoid."""),
        new_code_cell("""\
D, N, sigma = (25, 10, 0.01) if not SMOKE else (8, 4, 0.01)
q0_mean, r0_std = ln.qr_initial_moments(N, D, sigma)
print("E[q0] =", float(q0_mean), " std r0 =", float(r0_std))
t = np.linspace(0, 10, 300)
q1, r1 = ln.qr_trajectory(t, 1.0, q0_mean, 0.0)
qf, rf = ln.qr_full_path(t, 1.0, q0_mean, 0.0)
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.semilogy(t, qf, label="q full path"); ax.semilogy(t, np.maximum(rf, 1e-12), label="r full path")
ax.semilogy(t[q1 < 1], q1[q1 < 1], "k:", label="phase I")
ax.set(xlabel="t", title="phase I matched to phase II"); ax.legend()"""),
        new_markdown_cell("""\
## Final NTK and kernel-target alignment

$K_\\infty(x,x') = s^{2-2/L}[x\\cdot x' + (L-1)(\\beta\\cdot x)(\\beta\\cdot x')]$, with
alignment $L/\\sqrt{L^2+n-1}$."""),
        new_code_cell("""\
P, D = (40, 20) if not SMOKE else (8, 4)
X, y, beta = ln.scalar_teacher(P, D, 1.0, seed=0)
for L in (1, 2, 3, 6):
    K = ln.final_ntk(X, X, beta, 1.0, L)
    print(f"L={L}: alignment {ln.kernel_alignment(K, y):.4f}  formula {float(ln.final_alignment(L, min(P, D))):.4f}")"""),
        new_markdown_cell("## One comparison against simulation\n\nEvery closed form has a `compare_*` routine; "
                          "each returns a frozen result with `.passed` and `.plot()`."),
        new_code_cell("""\
res = ln.compare_learning_curves(sigmas=(0.1, 0.03, 0.01) if not SMOKE else (0.03, 0.01), D=D, N=D, P=P)
print(res)
res.plot()"""),
    ]


def silent_alignment():
    return [
        new_markdown_cell("""\
# Silent alignment, step by step (paper Fig. 2)

A two-layer linear network from small initialisation on whitened data: the NTK first
*aligns* with the task (phase I, time $\\sim 1/s$) while the loss has not moved, then grows
in scale only (phase II, time $\\sim \\ln(s/\\sigma^2)/2s$). The trained network is then kernel
regression with its *final* NTK."""),
        new_code_cell(SETUP),
        new_code_cell("""\
P, D, N = (100, 50, 50) if not SMOKE else (12, 6, 6)
s, sigma = 1.0, 1e-3
X, y, beta = ln.scalar_teacher(P, D, s, seed=0)
w0 = ln.init_network((D, N, 1), sigma, seed=1)
a0, W0 = w0[1][0], w0[0]
q0, r0 = 0.5 * (a0 @ a0 + (W0 @ beta) @ (W0 @ beta)), a0 @ W0 @ beta
t = np.linspace(0, 2 * float(ln.half_time(s, (q0 + r0) / 2)) + 3, 200 if not SMOKE else 30)
traj = ln.gradient_flow(w0, X, y, t, record=("weights",))"""),
        new_markdown_cell("## Step 1: kernel alignment, kernel norm and loss along the flow"),
        new_code_cell("""\
A, nrm = [], []
for k in range(len(t)):
    K = ln.empirical_ntk([w[k] for w in traj.weights_t], X, X)
    A.append(ln.kernel_alignment(K, y)); nrm.append(np.linalg.norm(K))
A, nrm = np.array(A), np.array(nrm)
A_final = float(ln.final_alignment(2, min(P, D)))
t_A = t[np.argmax(A >= 0.9 * A_final)]
t_L = t[np.argmax(traj.loss <= 0.9 * traj.loss[0])]
fig, ax = plt.subplots(1, 3, figsize=(12, 3.4))
ax[0].plot(t, traj.loss / traj.loss[0]); ax[0].set(title="loss", xlabel="t")
ax[1].semilogy(t, nrm / nrm[-1]); ax[1].set(title="kernel norm / final", xlabel="t")
ax[2].plot(t, A); ax[2].axhline(A_final, color="k", ls="--"); ax[2].set(title="alignment", xlabel="t")
for a in ax:
    a.axvline(t_A, color="C2", ls="-."); a.axvline(t_L, color="C3", ls="-.")
print(f"alignment at 90% of final at t={t_A:.2f}; loss down 10% at t={t_L:.2f}")"""),
        new_markdown_cell("## Step 2: the same through `compare_silent_alignment` (theory overlaid)"),
        new_code_cell("""\
res = ln.compare_silent_alignment(D=D, N=N, P=P, sigma=sigma)
print(res); print(res.notes)
res.plot()"""),
        new_markdown_cell("""\
## Step 3: the trained network is kernel regression with its final NTK

For a linear network both predictors interpolate within the row span of $X$, so the gap is
tiny for $P\\geq D$ and $O(\\sigma)$ for $P<D$, whatever the anisotropy $\\gamma$ of
$X_\\gamma = U S^\\gamma V^\\top$ (the growth with $\\gamma$ in the paper is a nonlinear-network
effect). Kernel regression with the *initial* NTK is a different predictor."""),
        new_code_cell("""\
res = ln.compare_kernel_gap(gammas=(0.0, 0.5, 1.0), Ps=(D, D // 2), D=D, N=N, sigma=0.01)
print(res.notes)
res.plot()"""),
        new_markdown_cell("## Step 4 (appendix G): kernel regression with $K(t)$ at any time gives the same function"),
        new_code_cell("""\
res = ln.compare_kernel_path(D=D, N=N, P=D // 2)
print(res.notes)
res.plot()"""),
    ]


def deep():
    return [
        new_markdown_cell("""\
# Deep networks: time scales and final kernels vs depth

From small initialisation the escape from the saddle takes $t_{1/2}\\sim\\ln(1/\\sigma)/s$ for
$L=2$ and $\\sim\\sigma^{2-L}/((L-2)s)$ for $L\\geq3$ (paper Fig. 3); modes with distinct
$s_\\alpha$ are learned in order; the final NTK aligns more with the task as $L$ grows
(Figs. E.1, E.3)."""),
        new_code_cell(SETUP),
        new_markdown_cell("## Several modes, learned in order, at every depth"),
        new_code_cell("""\
res = ln.compare_mode_strengths(depths=(2, 3, 4, 5) if not SMOKE else (2, 3), spectrum=(3.0, 2.0, 1.0))
print(res); print(res.notes)
res.plot()"""),
        new_markdown_cell("## Half-time against $\\sigma$"),
        new_code_cell("""\
res = ln.compare_half_time_scaling(depths=(2, 3, 4, 5) if not SMOKE else (2, 3))
print(res); print(res.notes)
res.plot()"""),
        new_markdown_cell("## Theory: half time and its small-$c_0$ asymptote"),
        new_code_cell("""\
sig = np.geomspace(0.05, 0.5, 20)
fig, ax = plt.subplots(figsize=(5, 3.5))
for L in (2, 3, 4, 5):
    ax.loglog(sig ** 2, ln.half_time(1.0, sig ** L, depth=L), label=f"L={L}")
ax.set(xlabel=r"$\\sigma^2$", ylabel=r"$t_{1/2}$ (c0 = $\\sigma^L$)"); ax.legend()"""),
        new_markdown_cell("## Final NTK and alignment vs depth"),
        new_code_cell("""\
res = ln.compare_final_ntk(depths=(2, 3, 4, 5, 6) if not SMOKE else (2, 3), sigmas=(0.2, 0.1))
print(res); print(res.notes)
res.plot()"""),
    ]


def nonlinear():
    return [
        new_markdown_cell("""\
# A nonlinear flow: kinks and stop rules

`gradient_flow` integrates networks with ReLU, leaky ReLU, softplus and tanh units, trained
biases, an output scale $\\alpha$, centring, per-layer multipliers and rates, and the mse or
soft-hinge loss (`docs/conventions.md`, "Beyond linear networks"). A ReLU flow is only
piecewise smooth: whenever a pre-activation $z_k(x_\\mu)$ of a training input changes sign
the right-hand side switches. The integrator finds the switches a step crosses, steps
across them with a low-order pair at the tolerance `kink_rtol`, and reports how many it
crossed (`traj.kinks`) and how long the flow chattered along a switching surface
(`traj.sliding_time`). A stop rule ends the run where the loss reaches a value, or where
every margin reaches 1, located inside the step (`traj.t_stop`).

The network here is the two-layer ReLU net of Luo et al. (2021) on four 1-d points,
$f(x) = \\sum_k a_k\\,\\mathrm{relu}(w_k x + b_k)$, with small input weights (their condensed
regime, $\\gamma = 1.4$, $\\gamma' = 0$)."""),
        new_code_cell(SETUP),
        new_code_cell("""\
X = np.array([[-1.0], [-1 / 3], [1 / 3], [1.0]])
y = np.array([0.6, -0.2, 0.1, 0.5])
m = 200 if not SMOKE else 40
scale = m ** -0.7                       # input and output weights ~ N(0, m^-1.4): gamma = 1.4
p = ln.zhou_parameterisation((1, m, 1), (scale, scale), 1.0, seed=0, biases=True)
t = np.concatenate([[0.0], np.geomspace(1e-1, 1e4, 100 if not SMOKE else 30)])
tr = ln.gradient_flow(p.weights, X, y, t, rtol=1e-6, kink_rtol=1e-4, stop=("loss", 1e-4),
                      record=("weights",), **p.flow_kwargs())
print(tr.message)
print(f"stop rule fired at t = {tr.t_stop:.4g}: loss {tr.loss[-1]:.3g} (initial {tr.loss[0]:.3g})")
print(f"kinks crossed {tr.kinks}, sliding time {tr.sliding_time:.3g}, steps on the low-order pair "
      f"{tr.fallback_steps} of {tr.nsteps}, gradient evaluations {tr.nfev}")"""),
        new_markdown_cell("""\
Later output times hold the stopped state. At this size the flow slides along switching
surfaces for nearly the whole run (the sliding time is close to `t_stop`), so the low-order
pair takes almost every step. Between the plateau and the stop the units' input weights
$(w_k, b_k)$ turn: the function becomes piecewise linear with a few kinks, placed where
the units have condensed."""),
        new_code_cell("""\
xs = np.linspace(-1.5, 1.5, 301)[:, None]
W1t, W2t = tr.weights_t
b1t, = tr.biases_t
fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(14, 3.6))
ax1.loglog(t[1:], tr.loss[1:])
ax1.axvline(tr.t_stop, color="k", ls=":", label="t_stop")
ax1.set(xlabel="t", ylabel="loss", title="loss, stopped at 1e-4"); ax1.legend()
for k, lab in zip(np.searchsorted(t, [1.0, 0.3 * tr.t_stop, tr.t_stop]), ("t ≈ 1", "t ≈ 0.3 t_stop", "stopped")):
    # F(x) as the simulator defines it, with the parameterisation's keywords
    ax2.plot(xs[:, 0], p.forward(xs, weights=[W1t[k], W2t[k]], biases=[b1t[k]])[:, 0], label=lab)
ax2.plot(X[:, 0], y, "ko")
ax2.set(xlabel="x", title="F(x) along the flow"); ax2.legend(fontsize=7)
for k, lab in ((0, "t = 0"), (-1, "stopped")):
    u = np.column_stack([W1t[k][:, 0], b1t[k]])
    ax3.hist(np.arctan2(u[:, 1], u[:, 0]), bins=72, weights=np.linalg.norm(u, axis=1), alpha=0.6, label=lab)
ax3.set(xlabel="angle of (w_k, b_k)", ylabel="norm-weighted count", title="orientations"); ax3.legend()
fig.tight_layout()
u = np.column_stack([tr.weights[0][:, 0], tr.biases[0]])
big = np.linalg.norm(u, axis=1) > 0.1 * np.linalg.norm(u, axis=1).max()
print("orientations of the units above 10 % of the largest (ln.condensation):",
      ln.condensation(tr.weights[0][big], tr.biases[0][big], cosines=False)[1], "of", big.sum())
print("relative change per layer (input layer with its bias, output layer):",
      ln.relative_change(p.weights, tr.weights, p.biases, tr.biases))"""),
        new_markdown_cell("""\
## The accuracy at kinks

Away from kinks each step meets `rtol`; steps across a switch (and along one, while the flow
slides) meet `kink_rtol` (default `max(rtol, 1e-4)`). The final state converges as
`kink_rtol` falls, at the cost of more evaluations near the switches."""),
        new_code_cell("""\
ref = None
for kr in ((1e-2, 1e-3, 1e-4) if not SMOKE else (1e-2, 1e-3)):
    r = ln.gradient_flow(p.weights, X, y, [0.0, 1e4], rtol=1e-7, kink_rtol=kr, stop=("loss", 1e-4),
                         **p.flow_kwargs())
    rd = ln.relative_change(p.weights, r.weights, p.biases, r.biases)
    ref = rd if ref is None else ref
    print(f"kink_rtol {kr:7.0e}: t_stop {r.t_stop:.6g}, RD {rd[0]:.6f}, {rd[1]:.6f}, kinks {r.kinks}, "
          f"evaluations {r.nfev}")"""),
        new_markdown_cell("""\
## The margin stop: soft hinge, centred, lazy and rich

With `loss="soft_hinge"` (labels ±1) and `stop="margin"` the flow stops once every training
margin $yF \\geq 1$, as Geiger et al. (2019) train. With `centered=True` the model is
$F = \\alpha(f - f_0)$; a large output scale $\\alpha$ fits the margins with a kernel that
hardly moves (lazy), a small one only after the features have moved (rich)."""),
        new_code_cell("""\
rng = np.random.default_rng(1)
Xc = rng.standard_normal((24 if not SMOKE else 12, 2))
yc = np.sign(Xc[:, 0] * Xc[:, 1])                        # XOR-like labels
q = ln.init_parameterised((2, 64 if not SMOKE else 16, 1), "ntk", 1.0, seed=0, biases=True, bias_std=1.0)
for a in (1e2, 1.0, 0.1):
    r = ln.gradient_flow(q.weights, Xc, yc, [0.0, 1e9], rtol=1e-6, loss="soft_hinge", stop="margin",
                         record=("outputs",),
                         **q.flow_kwargs(activation="relu", alpha=a, centered=True))
    K0 = ln.empirical_ntk(q.weights, Xc, Xc, **q.ntk_kwargs(activation="relu", alpha=a))
    K1 = ln.empirical_ntk(list(r.weights), Xc, Xc,
                          **q.ntk_kwargs(activation="relu", alpha=a, biases=list(r.biases)))
    F = r.outputs[-1, :, 0]                                   # F on the training inputs at the stop
    print(f"alpha = {a:g}: margins reached at t = {r.t_stop:.4g}, min y F = {np.min(yc * F):.4f}, "
          f"kernel drift {ln.kernel_drift(K0, K1):.3g}, kinks {r.kinks}")"""),
    ]


def lazy_rich():
    return [
        new_markdown_cell("""\
# Lazy and rich: three exact crossovers

Whether a network learns features (rich) or behaves as its linearisation around the
initial weights (lazy) depends on the scale and the balance of the initialisation. Three
closed forms of the package follow the crossover exactly, each beside the simulator:

1. the **λ-balanced** two-layer linear network, $W_2^\\top W_2 - W_1 W_1^\\top = \\lambda I$
   (Dominé et al. 2024): λ = 0 is the rich, sigmoidal regime, large λ the lazy one, where
   the network follows the linearised model `ln.lazy_prediction`;
2. the **single neuron** $f(x) = a\\,w^\\top x$ with layer-wise rates η_a, η_w (Kunin et al. 2024):
   the conserved δ = η_w a² − η_a‖w‖² sets the path and the implicit bias;
3. the **diagonal network** β = w₊² − w₋² (Woodworth et al. 2020): from w± = α its limit is
   the minimum of a potential Q_α, the minimum-ℓ² solution for large α and the minimum-ℓ¹
   one as α → 0."""),
        new_code_cell(SETUP),
        new_markdown_cell("## 1. λ-balanced flow: exact path, and the lazy limit"),
        new_code_cell("""\
D, N, C, P, Q = (6, 3, 3, 30, 20) if not SMOKE else (4, 2, 2, 12, 6)   # N <= C, D: every λ is possible
rng = np.random.default_rng(0)
X = ln.whitened_inputs(P, D, seed=0)
T = rng.standard_normal((C, D))
Y = X @ T.T
Syx = Y.T @ X / P
Xtest = rng.standard_normal((Q, D))
t = np.concatenate([[0.0], np.geomspace(1e-2, 30.0, 60 if not SMOKE else 20)])
fig, ax = plt.subplots(figsize=(5.5, 3.8))
for lam in (-2.0, 0.0, 2.0, 20.0):
    W1, W2 = ln.init_lambda_balanced((D, N, C), lam, 0.3, seed=2)
    W, A, B = ln.lambda_balanced_flow(t, W1, W2, Syx)
    tr = ln.gradient_flow([W1, W2], X, Y, t, record=("weights",))
    err = np.abs(W - tr.end_to_end).max() / max(1.0, np.abs(W).max())
    # the lazy model: the NTK at t = 0, F_t = Y + exp(-K t / P)(F_0 - Y) (and on test inputs)
    K = ln.empirical_ntk([W1, W2], X, X)
    Kq = ln.empirical_ntk([W1, W2], Xtest, X)
    W0 = W2 @ W1
    _, F_lazy = ln.lazy_prediction(t, K, Kq, Y, F0_train=X @ W0.T, F0_test=Xtest @ W0.T)
    F_sim = np.einsum("qd,tcd->tqc", Xtest, tr.end_to_end)
    gap = np.abs(F_sim - F_lazy).max() / np.abs(F_sim[-1]).max()
    ax.semilogx(t[1:], tr.loss[1:], label=f"λ = {lam:g}")
    print(f"λ = {lam:5g}: exact path vs simulation {err:.1e}; test outputs vs the lazy model {gap:.3f}")
ax.set(xlabel="t", ylabel="loss", title="λ < 0 delayed, λ = 0 sigmoidal (rich), λ ≫ 0 exponential (lazy)")
ax.legend()"""),
        new_markdown_cell("""\
## 2. The single neuron with η_a ≠ η_w

On whitened data ν(t) = w(t)ᵀβ / a(t) has a closed form, set by the conserved
δ = η_w a² − η_a‖w‖². With fewer samples than inputs the interpolating limit is the
minimum-norm interpolant plus a∞ times the null-space part of the initial w, and δ fixes a∞:
the start is remembered."""),
        new_code_cell("""\
D1, P1 = (5, 30) if not SMOKE else (3, 10)
X1 = ln.whitened_inputs(P1, D1, seed=0)
beta = np.random.default_rng(0).standard_normal(D1)
y1 = X1 @ beta
w0 = 0.5 * np.random.default_rng(1).standard_normal(D1) / np.sqrt(D1)
t1 = np.linspace(0.0, 15.0, 60 if not SMOKE else 20)
fig, ax = plt.subplots(figsize=(5.5, 3.8))
for eta_a, eta_w, a0 in ((0.25, 2.0, 0.1), (1.0, 1.0, 0.5), (2.0, 0.25, 2.0)):
    tr = ln.gradient_flow([w0[None, :], np.array([[a0]])], X1, y1, t1, lr_scales=(eta_w, eta_a),
                          record=("weights",))
    w_t, a_t = tr.weights_t[0][:, 0, :], tr.weights_t[1][:, 0, 0]
    nu_th = ln.single_neuron_nu(t1, a0, w0, beta, eta_a=eta_a, eta_w=eta_w)
    delta = ln.single_neuron_delta(a_t, w_t, eta_a, eta_w)
    line, = ax.plot(t1, (w_t @ beta) / a_t, lw=3, alpha=0.4)
    ax.plot(t1, nu_th, "--", color=line.get_color(), label=f"η_a={eta_a:g}, η_w={eta_w:g}: δ={delta[0]:+.2f}")
    print(f"η_a = {eta_a}, η_w = {eta_w}: max |ν_sim - ν_th| = {np.abs((w_t @ beta) / a_t - nu_th).max():.1e},"
          f" δ drift {np.ptp(delta):.1e}")
ax.set(xlabel="t", ylabel="ν = wᵀβ / a", title="simulation (thick) and closed form (dashed)"); ax.legend(fontsize=7)"""),
        new_code_cell("""\
# fewer samples than inputs: the interpolating limit depends on the start through delta
Xu = np.random.default_rng(2).standard_normal((3, 7))
yu = np.random.default_rng(3).standard_normal(3)
wu = np.random.default_rng(4).standard_normal(7) / np.sqrt(7)
for eta_a, eta_w in ((0.25, 2.0), (2.0, 0.25)):
    au = 1.2 * np.sqrt(eta_a / eta_w) * np.linalg.norm(wu)
    b_th, a_inf = ln.single_neuron_implicit_bias(Xu, yu, au, wu, eta_a, eta_w)
    tr = ln.gradient_flow([wu[None, :], np.array([[au]])], Xu, yu, [0.0, 1600.0], lr_scales=(eta_w, eta_a))
    b_sim = tr.end_to_end[-1, 0]
    print(f"η_a = {eta_a}, η_w = {eta_w}: |β_sim - β_th| / |β_th| = "
          f"{np.abs(b_sim - b_th).max() / np.abs(b_th).max():.1e}; distance from the min-norm solution "
          f"{np.linalg.norm(b_th - np.linalg.pinv(Xu) @ yu):.3f}")"""),
        new_markdown_cell("""\
## 3. The diagonal network: from ℓ² to ℓ¹

A sparse teacher (two of twelve coordinates) on five samples. Large α: the flow ends at the
minimum-ℓ² interpolant (lazy); small α: near the minimum-ℓ¹ one, the sparse teacher (rich)."""),
        new_code_cell("""\
# ln.compare_diagonal_bias runs the diagonal network's flow (the simulator's "diagonal"
# model, from w± = α, until the loss has fallen to 1e-16 of its start, at a tolerance and
# step budget sized for each α) on this problem (P = 5, D = 12, seed 0) beside argmin Q_α
Pd, Dd = 5, 12
Xd = np.random.default_rng(0).standard_normal((Pd, Dd))
bt = np.zeros(Dd); bt[:2] = [2.0, -1.5]
yd = Xd @ bt
b2 = np.linalg.pinv(Xd) @ yd
alphas = (3.0, 1.0, 0.3, 0.1, 0.03, 0.01) if not SMOKE else (1.0, 0.1)
res = ln.compare_diagonal_bias(alphas=alphas, P=Pd, D=Dd, seed=0)
for a, err in zip(alphas, res.arrays["errors"]):
    print(f"α = {a:5g}: |β_sim - β_th|∞ / |β_th|∞ = {err:.1e}")
print(f"largest {res.error:.1e} against a tolerance of {res.tolerance:.1e}: passed {res.passed}")
fig, ax = plt.subplots(figsize=(5.5, 3.8))
ax.semilogx(alphas, res.arrays["l1_sim"], "o", label="‖β‖₁ simulated")
ax.semilogx(alphas, res.arrays["l1_theory"], "-", label="‖β‖₁ of argmin Q_α")
ax.axhline(np.abs(bt).sum(), color="k", ls=":", label="min ℓ¹ (the teacher)")
ax.axhline(np.abs(b2).sum(), color="grey", ls="--", label="min ℓ²")
ax.set(xlabel="α (initial scale)", ylabel="‖β‖₁", title="implicit bias of the diagonal network"); ax.legend(fontsize=7)"""),
        new_markdown_cell("""\
## 4. On real data: digits, lazy and rich

`ln.load_digits` gives the bundled 8×8 digits ready to train on: two classes (labels ±1),
a seeded split, pixels standardised with the training set's statistics, here projected on
its top 10 principal components. A centred two-layer ReLU network, $F = \\alpha(f - f_0)$,
trained on the soft hinge until every margin $yF \\geq 1$: at large α the kernel on the
test digits hardly moves (lazy), at small α it moves by more than its own size (rich)."""),
        new_code_cell("""\
Xtr, ytr, Xte, yte = ln.load_digits((3, 5), n_train=100 if not SMOKE else 30,
                                    n_test=200 if not SMOKE else 40, pca=10, seed=0)
q = ln.init_parameterised((10, 128 if not SMOKE else 16, 1), "ntk", 1.0, seed=0)
for a in (1e2, 1.0, 0.1):
    r = ln.gradient_flow(q.weights, Xtr, ytr, [0.0, 1e9], rtol=1e-6, loss="soft_hinge", stop="margin",
                         **q.flow_kwargs(activation="relu", alpha=a, centered=True))
    F = q.forward(Xte, weights=list(r.weights), activation="relu", alpha=a, centered=True)[:, 0]
    nk = q.ntk_kwargs(activation="relu", alpha=a)
    drift = ln.kernel_drift(ln.empirical_ntk(q.weights, Xte, Xte, **nk),
                            ln.empirical_ntk(list(r.weights), Xte, Xte, **nk))
    print(f"alpha = {a:g}: margins reached at t = {r.t_stop:.3g}, test error "
          f"{np.mean(np.sign(F) != yte):.3f}, kernel drift on the test digits {drift:.3g}")"""),
    ]


def phase_diagram():
    return [
        new_markdown_cell("""\
# A phase diagram from a sweep spec

The two-layer ReLU phase diagram of Luo et al. (2021) (`experiments/luo_two_layer`), on a
small grid: a sweep spec names the point function (`luo:point`: train until the loss
reaches 1e-4, return the relative change RD of the input weights), the grid and the store.
`python -m linearnets sweep run` fills the SQLite store point by point (re-running
resumes); the diagram is read back from the store: the slope of log RD against log width
at each (γ, γ′) is the regime, linear (RD → 0), critical or condensed (RD → ∞)."""),
        new_code_cell(SETUP),
        new_code_cell("""\
import json, pathlib, subprocess, sys, tempfile

ROOT = next(p for p in (pathlib.Path.cwd(), *pathlib.Path.cwd().parents) if (p / "experiments").is_dir())
EXP = ROOT / "experiments" / "luo_two_layer"                      # luo.py: the point function
sys.path.insert(0, str(EXP))
work = pathlib.Path(tempfile.mkdtemp(prefix="phase_"))
grid = ('gamma = [0.4, 1.0, 1.6]\\ngamma_prime = [-0.6, 0.0, 0.6]\\nm = [100, 200, 400]\\nseed = {range = [0, 2]}'
        if not SMOKE else 'gamma = [0.4, 1.6]\\ngamma_prime = [0.0]\\nm = [50, 100, 200]\\nseed = [0]')
spec = work / "spec.toml"
spec.write_text(f\"\"\"[sweep]
name = "luo_small"
function = "luo:point"
plot = "luo:plot"
table = "luo:table"
version = "1"
store = "luo_small.sqlite"

[grid]
{grid}

[fixed]
loss_stop = 1e-4
\"\"\")
print(spec.read_text())"""),
        new_code_cell("""\
env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(EXP), str(ROOT), os.environ.get("PYTHONPATH", "")]))
def cli(*args):
    out = subprocess.run([sys.executable, "-m", "linearnets", "sweep", *args, str(spec)], env=env,
                         capture_output=True, text=True)
    print(out.stdout[-2000:], out.stderr[-2000:] if out.returncode else "")
    assert out.returncode == 0
jobs = "2" if not SMOKE else "1"
cli("run", "--jobs", jobs, "--no-progress")
cli("status")
cli("run", "--jobs", jobs, "--no-progress")          # again: every point is in the store, nothing runs"""),
        new_markdown_cell("The diagram, read back from the store (`results_frame`) and fitted per grid point (`luo.table`, `ln.rd_slope`):"),
        new_code_cell("""\
import luo
from linearnets.sweep import load_spec, results_frame

sp = load_spec(str(spec))
df = results_frame(sp)
rows = luo.table(df)
fig, ax = plt.subplots(figsize=(6.5, 4))
marks = {"linear": "o", "critical": "s", "condensed": "^"}
for r in rows:
    ax.scatter(r["gamma_prime"], r["gamma"], marker=marks[r["measured"]], s=120,
               c="C0" if r["measured"] == r["paper"] else "C3")
    ax.annotate(f"{r['slope']:+.2f}", (r["gamma_prime"], r["gamma"]), textcoords="offset points", xytext=(9, -3),
                fontsize=8)
g = np.linspace(-0.8, 0.8, 50)
ax.plot(g, np.where(g <= 0, 1.0, 1.0 + g), "k--", lw=1, label="paper: linear | condensed")
for lab, mk in marks.items():
    ax.scatter([], [], marker=mk, c="grey", label=lab)
ax.set(xlabel="γ′", ylabel="γ", title="RD slope and regime (red: differs from the paper's rule)")
ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
fig.tight_layout()
for r in rows:
    print(f"γ = {r['gamma']:.1f}, γ′ = {r['gamma_prime']:+.1f}: slope {r['slope']:+.3f} ± {r['stderr']:.3f} "
          f"-> {r['measured']} (paper: {r['paper']})")"""),
        new_markdown_cell("""\
Points on the boundary (γ = 1 with γ′ ≤ 0, and γ′ = γ − 1) are the hardest to read at
small widths and few seeds: their slope is near 0 either way. The experiment's default
grid (`experiments/luo_two_layer/spec.toml`: widths 250 to 2000, 3 seeds) reads all 25
of its points as the paper's rule has them.

`sweep plot` draws the experiment's own figure and writes its table (`.csv`) and the
version and commit that produced it (`.provenance.json`) beside it:"""),
        new_code_cell("""\
cli("plot")
print((work / "luo_small.csv").read_text()[:600])
print(json.dumps(json.loads((work / "luo_small.provenance.json").read_text())["written_by"], indent=1))"""),
    ]


def main():
    for name, cells in (("01_closed_forms_tour", tour()), ("02_silent_alignment", silent_alignment()),
                        ("03_deep_networks", deep()), ("04_nonlinear_flow", nonlinear()),
                        ("05_lazy_rich", lazy_rich()), ("06_phase_diagram", phase_diagram())):
        nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                               "language": "python"}})
        nbformat.write(nb, os.path.join(HERE, name + ".ipynb"))


if __name__ == "__main__":
    main()
