"""The sweep on a loopback Dask cluster: the same numbers as the local pool, failures stored."""
import os

import numpy as np
import pytest

import linearnets as ln

pytest.importorskip("pandas")
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    from distributed import LocalCluster

    with LocalCluster(host="127.0.0.1", dashboard_address=None, n_workers=2, threads_per_worker=1,
                      processes=True, silence_logs=40) as c:
        yield c


def test_dask_equals_local(tmp_path, cluster):
    grid = {"n": [8, 40], "seed": range(4)}
    local = ln.sweep("sweep_fixtures:linalg", grid, store=str(tmp_path / "local.sqlite"), jobs=2,
                     progress=False, entropy=5)
    dask = ln.sweep("sweep_fixtures:linalg", grid, store=str(tmp_path / "dask.sqlite"),
                    scheduler=cluster.scheduler_address, progress=False, entropy=5)
    assert (local["status"] == "done").all() and (dask["status"] == "done").all()
    # the same draws on both (a point's stream depends on the point only); the arithmetic
    # runs in other processes, whose BLAS may use another thread count, so the results
    # agree to the rounding of a well-conditioned solve (cond(S) <= 5 here: ~n eps cond),
    # while a stream that depended on order or worker would differ at O(1)
    for col in ("logdet", "x_norm", "top"):
        np.testing.assert_allclose(local[col].to_numpy(), dask[col].to_numpy(), rtol=1e-12,
                                   atol=0, err_msg=col)
    # the points ran on the cluster's worker processes, not here
    from linearnets.sweep.store import Store
    with Store(str(tmp_path / "dask.sqlite"), readonly=True) as st:
        pids = {r["provenance"]["pid"] for r in st.rows().values()}
        execs = {r["provenance"]["executor"] for r in st.rows().values()}
    assert os.getpid() not in pids and all(e.startswith("Dask scheduler tcp://127.0.0.1") for e in execs)


def test_dask_raising_point_and_resume(tmp_path, cluster):
    store = str(tmp_path / "f.sqlite")
    log = str(tmp_path / "calls.log")
    df = ln.sweep("sweep_fixtures:fail_when", {"x": [0.0, 0.5, 1.0]}, store=store,
                  scheduler=cluster.scheduler_address, progress=False)
    assert list(df["status"]) == ["done", "failed", "done"] and "bad point" in df.loc[0.5, "error"]
    df = ln.sweep("sweep_fixtures:logged", {"x": [1.0, 2.0]}, {"log": log}, store=store.replace("f.", "g."),
                  scheduler=cluster.scheduler_address, progress=False)
    df = ln.sweep("sweep_fixtures:logged", {"x": [1.0, 2.0, 3.0]}, {"log": log},
                  store=store.replace("f.", "g."), scheduler=cluster.scheduler_address, progress=False)
    with open(log) as fh:
        assert len(fh.readlines()) == 3
    assert list(df["y"]) == [2.0, 4.0, 6.0]


def test_dask_workers_one_thread(tmp_path, cluster):
    from distributed import Client

    ln.sweep("sweep_fixtures:quadratic", {"x": [1.0]}, store=str(tmp_path / "q.sqlite"),
             scheduler=cluster.scheduler_address, progress=False)
    with Client(cluster.scheduler_address, set_as_default=False) as c:
        env = c.run(lambda: {v: os.environ.get(v) for v in ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS")})
    for w in env.values():
        assert w == {"NUMBA_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
