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


def main():
    for name, cells in (("01_closed_forms_tour", tour()), ("02_silent_alignment", silent_alignment()),
                        ("03_deep_networks", deep())):
        nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                               "language": "python"}})
        nbformat.write(nb, os.path.join(HERE, name + ".ipynb"))


if __name__ == "__main__":
    main()
