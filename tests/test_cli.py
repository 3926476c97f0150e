"""The ``python -m linearnets`` command line: help, verify, --only, exit codes, report."""
import os
import subprocess
import sys

import numpy as np
import pytest

import linearnets as ln
from linearnets import cli, compare

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
    for opt in ("--only", "--preset", "--full", "--backend", "--seed", "--out"):
        assert opt in p.stdout


def test_verify_everything_passes_and_writes_report(tmp_path, capsys):
    """The whole default verify job (small settings) as ``python -m linearnets verify`` runs it."""
    out = tmp_path / "rep"
    rc = cli.main(["verify", "--out", str(out), "--no-progress"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "FAIL" not in text and "PASS" in text
    for name in compare.CHECKS:
        assert name in text
        assert (out / f"{name}.png").stat().st_size > 10_000
    report = (out / "report.md").read_text()
    assert "| check | theory |" in report and "![final_ntk](final_ntk.png)" in report


def test_only_runs_one_check(tmp_path, capsys):
    rc = cli.main(["verify", "--only", "phase_one", "--out", str(tmp_path), "--no-progress"])
    text = capsys.readouterr().out
    assert rc == 0
    assert "phase_one" in text and "initial_moments" not in text and "final_ntk" not in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["phase_one.png", "report.md"]


def test_one_name_per_row_in_list_table_only_and_report(tmp_path, capsys):
    """--list, --only, the table rows, the figures and the report's sections use the same names."""
    assert cli.main(["verify", "--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert listed == list(compare.CHECKS) and len(set(listed)) == len(listed)
    assert {"half_time_scaling", "initial_moments", "silent_alignment_L3", "kernel_gap"} <= set(listed)
    rc = cli.main(["verify", "--only", "initial_moments,silent_alignment_L3", "--only", "initial_moments",
                   "--out", str(tmp_path), "--no-progress"])
    text = capsys.readouterr().out
    assert rc == 0, text
    rows = [line.split()[0] for line in text.splitlines()[3:5]]
    assert rows == ["initial_moments", "silent_alignment_L3"]
    report = (tmp_path / "report.md").read_text()
    assert "## initial_moments:" in report and "## silent_alignment_L3:" in report
    assert sorted(p.name for p in tmp_path.iterdir()) == ["initial_moments.png", "report.md",
                                                           "silent_alignment_L3.png"]


def test_ordering_check_prints_the_inequality_with_both_sides():
    r = ln.compare_silent_alignment(depth=3, D=10, N=10, P=20, sigma=0.1)
    assert r.inequality == "t_A < t_L" and r.passed
    row = cli.format_table([r]).splitlines()[2]
    assert cli.format_table([r], title="T").splitlines()[3] == row
    assert "t_A < t_L" in row and f"{r.theory:.4g} < {r.simulation:.4g}" in row
    assert r.theory == float(r.arrays["t_align"]) and r.simulation == float(r.arrays["t_loss"])
    assert "PASS" in row and " 0 " not in row


@pytest.mark.parametrize("argv", [["--only", "nonsense"], ["--only", "phase_one,nonsense"],
                                  ["--backend", "gpu"], ["--only", ","], ["--preset", "huge"],
                                  ["--seed", "-1"], ["--seed", "1.5"], ["--seed", "abc"],
                                  ["--full", "--preset", "paper"]])
def test_bad_only_backend_preset_or_seed_is_a_usage_error(tmp_path, capsys, argv):
    assert cli.main(["verify", *argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "usage:" in err and "Traceback" not in err
    expect = {"--only": "available", "--backend": "invalid choice", "--preset": "invalid choice",
              "--seed": "seed must be an integer >= 0", "--full": "not allowed with"}[argv[0]]
    assert expect in err
    assert not (tmp_path / "report.md").exists()


def test_the_seed_and_preset_head_the_table_and_the_report(tmp_path, capsys):
    rc = cli.main(["verify", "--only", "initial_moments", "--seed", "7", "--full", "--out", str(tmp_path),
                   "--no-progress", "--no-figures"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert text.splitlines()[0] == "linearnets verify: preset=full, seed=7, backend=auto"
    assert text.splitlines()[1].split()[0] == "check"
    report = (tmp_path / "report.md").read_text()
    assert report.splitlines()[0].endswith("seed 7") and "preset=full, seed=7" in report
    assert "n_samples=20000" in report and "seed=7" in report


def test_bad_backend_in_a_subprocess_is_a_usage_error(tmp_path):
    p = _run("verify", "--backend", "nonsense", "--out", str(tmp_path))
    assert p.returncode == 2 and "invalid choice" in p.stderr and "Traceback" not in p.stderr


def test_a_check_that_raises_is_an_error_row_and_the_rest_still_run(tmp_path, capsys, monkeypatch):


    def boom(full=False, seed=0, backend="auto"):
        raise RuntimeError("gradient flow failed: the step budget (1000000 steps) ran out")
    monkeypatch.setitem(compare.CHECKS, "phase_one", compare.Check("phase_one", "raises", boom))
    rc = cli.main(["verify", "--only", "phase_one,initial_moments", "--out", str(tmp_path), "--no-progress"])
    text = capsys.readouterr().out
    assert rc == 1
    lines = text.splitlines()
    assert lines[3].split()[0] == "phase_one" and lines[3].rstrip().endswith("ERROR")
    assert "RuntimeError: gradient flow failed" in lines[3]
    assert lines[4].split()[0] == "initial_moments" and lines[4].rstrip().endswith("PASS")
    report = (tmp_path / "report.md").read_text()
    assert "1 of 2 checks passed (1 raised an error)" in report
    assert "the step budget (1000000 steps) ran out" in report
    assert (tmp_path / "initial_moments.png").exists() and not (tmp_path / "phase_one.png").exists()


def test_a_figure_that_fails_does_not_lose_the_report(tmp_path, monkeypatch):
    import dataclasses
    r = ln.compare_initial_moments(n_samples=200)
    monkeypatch.setitem(compare.CHECKS, "initial_moments",
                        dataclasses.replace(compare.CHECKS["initial_moments"], plot=lambda res: 1 / 0))
    path = cli.write_report([r], str(tmp_path))
    assert "figure failed: `ZeroDivisionError" in open(path).read()


def test_failing_check_gives_nonzero_exit(tmp_path, capsys, monkeypatch):
    # a wrong closed form (E[q0] without its N/D term) must turn the job red
    monkeypatch.setattr(compare.alignment, "qr_initial_moments", lambda N, D, s: (0.5 * s ** 2, s ** 2 / np.sqrt(D)))
    rc = cli.main(["verify", "--only", "initial_moments", "--out", str(tmp_path), "--no-progress",
                   "--no-figures"])
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
