"""The ``python -m linearnets`` command line: help, verify, --only, exit codes, report."""
import os
import subprocess
import sys

import numpy as np
import pytest

import linearnets as ln
from linearnets import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "linearnets", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=600)


def test_help_lists_subcommands():
    p = _run("--help")
    assert p.returncode == 0
    assert "verify" in p.stdout


def test_verify_help_lists_options():
    p = _run("verify", "--help")
    assert p.returncode == 0
    for opt in ("--only", "--full", "--backend", "--seed", "--out"):
        assert opt in p.stdout


def test_verify_everything_passes_and_writes_report(tmp_path, capsys):
    """The whole default verify job (small settings) as ``python -m linearnets verify`` runs it."""
    out = tmp_path / "rep"
    rc = cli.main(["verify", "--out", str(out), "--no-progress"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "FAIL" not in text and "PASS" in text
    for name in ("learning_curve", "phase_one", "mode_strengths", "half_time_scaling", "final_ntk",
                 "silent_alignment", "kernel_gap", "kernel_path"):
        assert name in text
        assert (out / f"{name}.png").stat().st_size > 10_000
    report = (out / "report.md").read_text()
    assert "| check | theory |" in report and "![final_ntk](final_ntk.png)" in report


def test_only_runs_one_check(tmp_path, capsys):
    rc = cli.main(["verify", "--only", "phase_one", "--out", str(tmp_path), "--no-progress"])
    text = capsys.readouterr().out
    assert rc == 0
    assert "phase_one" in text and "initial_moments" in text and "final_ntk" not in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["initial_moments.png", "phase_one.png", "report.md"]


def test_unknown_check_is_usage_error(tmp_path, capsys):
    assert cli.main(["verify", "--only", "nonsense", "--out", str(tmp_path)]) == 2
    assert "available" in capsys.readouterr().err


def test_failing_check_gives_nonzero_exit(tmp_path, capsys, monkeypatch):
    # a wrong closed form (E[q0] without its N/D term) must turn the job red
    monkeypatch.setattr(ln, "qr_initial_moments", lambda N, D, s: (0.5 * s ** 2, s ** 2 / np.sqrt(D)))
    rc = cli.main(["verify", "--only", "phase_one", "--out", str(tmp_path), "--no-progress", "--no-figures"])
    assert rc == 1
    assert "FAIL" in capsys.readouterr().out


def test_list_and_format_table():
    assert cli.main(["verify", "--list"]) == 0
    r = ln.compare_initial_moments(n_samples=200)
    table = cli.format_table([r])
    assert table.splitlines()[0].split() == ["check", "theory", "simulation", "error", "tolerance", "result"]
    assert cli.format_table([r], markdown=True).startswith("| check |")


@pytest.mark.slow
def test_subprocess_verify_exit_code(tmp_path):
    p = _run("verify", "--only", "kernel_path", "--out", str(tmp_path))
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_backend_and_seed_are_passed_through(tmp_path, capsys, backend):
    rc = cli.main(["verify", "--only", "kernel_path", "--backend", backend, "--seed", "3",
                   "--out", str(tmp_path), "--no-progress", "--no-figures"])
    assert rc == 0
    assert f"backend={backend}" in (tmp_path / "report.md").read_text()
    assert "seed=3" in (tmp_path / "report.md").read_text()
