"""A Dask ``LocalCluster`` for tests that run beside each other (pytest-xdist workers, other
sessions): its scheduler binds no fixed port. ``dashboard_address=None`` turns the dashboard off,
but the scheduler still serves its HTTP routes on the dashboard's default port, 8787, and a
second cluster on the host finds it taken ("Port 8787 is already in use", then a random port):
here that server takes a free port of the loopback's from the start."""

from __future__ import annotations

import pytest


def local_cluster(**options):
    """``distributed.LocalCluster(**options)``, no dashboard, its HTTP server on a free port."""
    distributed = pytest.importorskip("distributed")
    return distributed.LocalCluster(
        dashboard_address=None, scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}, **options
    )


def batch_on_cluster(manifest, out, *flags, n_workers: int = 1, allowed_failures: int | None = None):
    """``processkit-cli batch MANIFEST --out OUT FLAGS`` over a fresh cluster of ``n_workers``
    one-thread worker processes (``allowed_failures``: the scheduler's, for a task whose worker
    dies); the finished process."""
    import dask

    from conftest import run_cli

    settings = {} if allowed_failures is None else {"distributed.scheduler.allowed-failures": allowed_failures}
    with dask.config.set(settings), local_cluster(n_workers=n_workers, threads_per_worker=1, processes=True) as cluster:
        return run_cli(
            "batch", manifest, "--out", out, *flags, "--dask-scheduler", cluster.scheduler_address, timeout=120
        )
