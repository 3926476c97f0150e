"""Every derivation in ``theory/`` ships a sympy script that exits non-zero on failure."""
import pathlib
import subprocess
import sys

import pytest

THEORY = pathlib.Path(__file__).resolve().parents[2] / "theory"
SCRIPTS = sorted(p for p in THEORY.glob("*.py") if not p.name.startswith("_"))


def test_every_derivation_has_a_check_script():
    docs = {p.stem for p in THEORY.glob("*.md")} - {"README"}
    missing = docs - {p.stem for p in SCRIPTS}
    assert not missing, f"derivations without a sympy check: {sorted(missing)}"


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_theory_script_passes(script):
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
