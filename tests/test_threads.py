"""The BLAS threads of the package's calls (linearnets._threads; docs/methods.md, "Threads")."""
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import linearnets as ln
from linearnets import _threads


def blas_counts():
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


@pytest.fixture
def machine(monkeypatch):
    """Four free cores, nobody else's load, no override in the environment."""
    monkeypatch.delenv(_threads.ENV_VAR, raising=False)
    monkeypatch.setattr(_threads, "_cores", lambda: 4)
    monkeypatch.setattr(_threads.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    monkeypatch.setattr(_threads, "_own_rate", lambda now, cpu: 0.0)
    monkeypatch.setattr(_threads, "_running_now", lambda: 1)
    return monkeypatch


def test_small_products_run_on_one_thread(machine):
    assert _threads.blas_threads(_threads.CROSSOVER - 1, pool=4) == 1
    assert _threads.blas_threads(_threads.CROSSOVER, pool=4) == 4
    assert _threads.blas_threads(_threads.CROSSOVER, pool=3) == 3


def test_large_products_leave_the_busy_cores(machine):
    machine.setattr(_threads.os, "getloadavg", lambda: (2.2, 0.0, 0.0))
    assert _threads.blas_threads(1e12, pool=4) == 2
    machine.setattr(_threads.os, "getloadavg", lambda: (9.0, 0.0, 0.0))
    assert _threads.blas_threads(1e12, pool=4) == 1
    # this process's own recent load is not another's
    machine.setattr(_threads.os, "getloadavg", lambda: (1.0, 0.0, 0.0))
    machine.setattr(_threads, "_own_rate", lambda now, cpu: 1.0)
    assert _threads.blas_threads(1e12, pool=4) == 4
    # a process started a moment ago: not yet in the average, running now
    machine.setattr(_threads, "_running_now", lambda: 3)
    assert _threads.blas_threads(1e12, pool=4) == 2


def test_running_now_reads_this_machine():
    assert _threads._running_now() >= 1


def test_own_rate_is_the_cpu_rate_over_the_window(monkeypatch):
    monkeypatch.setattr(_threads, "_samples", [])
    assert _threads._own_rate(100.0, 5.0) == 0.0
    assert _threads._own_rate(110.0, 10.0) == pytest.approx(0.5)
    assert _threads._own_rate(200.0, 15.0) == pytest.approx(5.0 / 90.0)   # (110, 10) kept


def test_environment_and_context_fix_the_count(machine):
    machine.setenv(_threads.ENV_VAR, "3")
    assert _threads.blas_threads(1.0, pool=4) == 3
    with ln.threads(2):
        assert _threads.blas_threads(1e12, pool=4) == 2
        with ln.threads(1):
            assert _threads.blas_threads(1e12, pool=4) == 1
        assert _threads.blas_threads(1e12, pool=4) == 2
    machine.setenv(_threads.ENV_VAR, "zero")
    with pytest.raises(ValueError, match=_threads.ENV_VAR):
        _threads.blas_threads(1.0, pool=4)


@pytest.mark.parametrize("n", [0, -1, 1.5, True, "2", None])
def test_threads_rejects_what_is_not_a_count(n):
    with pytest.raises(ValueError, match="threads: n"):
        with ln.threads(n):
            pass


def test_limited_sets_and_restores_the_libraries(machine):
    with threadpool_limits(2):
        with _threads.limited(1.0) as n:
            assert n == 1 and set(blas_counts()) == {1}
        assert set(blas_counts()) == {2}
        with threadpool_limits(1), _threads.limited(1e12) as n:   # a caller's limit caps
            assert n == 1


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_a_small_flow_runs_on_one_thread(machine, backend):
    X, y, _ = ln.scalar_teacher(20, 4, 1.0, seed=0)
    pf = ln.sim.flow.prepare_flow(X, y, (4, 8, 1), [0.5], backend=backend)
    assert pf._work < _threads.CROSSOVER
    seen, finish = [], pf._finish

    def observed(*args):          # the BLAS setting as the run ends (either path's)
        seen.append(set(blas_counts()))
        return finish(*args)
    machine.setattr(pf, "_finish", observed)
    with threadpool_limits(2):
        traj = pf.run(ln.init_network((4, 8, 1), 0.3, seed=0))
        assert set(blas_counts()) == {2}
    assert traj.success and seen == [{1}]
