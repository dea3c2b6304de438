"""A Dask ``LocalCluster`` for tests that run beside each other (pytest-xdist workers, other
sessions): its scheduler binds no fixed port. ``dashboard_address=None`` turns the dashboard off,
but the scheduler still serves its HTTP routes on the dashboard's default port, 8787, and a
second cluster on the host finds it taken ("Port 8787 is already in use", then a random port):
here that server takes a free port of the loopback's from the start."""

from __future__ import annotations

import os
import signal
import threading

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


def held_job(began, id: str, then: str = "exec sleep 60.0731") -> dict:
    """A manifest line: a job that leaves its worker's pid (its parent) and its own in
    ``began/<id>``, then runs ``then`` (by default, until it is stopped)."""
    file = f"{began}/{id}"
    return {"id": id, "args": ["sh", "-c", f"echo $PPID $$ > {file}.new; mv {file}.new {file}; {then}"], "timeout": 100}


def job_pids(began, id: str) -> list[int]:
    """The pids ``held_job`` left, once it left them: its worker's and its own."""
    from conftest import wait_for_file

    wait_for_file(began / id)
    return [int(pid) for pid in (began / id).read_text().split()]


def run_on_dask_beside(beside, address: str, jobs, settings):
    """``fleet.run_on_dask(address, jobs, settings)`` run in this process while ``beside`` runs on
    a thread of its own (it sends the stop, closes the scheduler): the lines and counts, once both
    are over."""
    from processkit.batching import fleet

    thread = threading.Thread(target=beside)
    thread.start()
    try:
        return fleet.run_on_dask(address, jobs, settings)
    finally:
        thread.join()


def stop_this_client() -> None:
    """SIGTERM to this process, once the client ``fleet.run_on_dask`` runs here has its stop
    handler on (from another thread of the test's)."""
    from streams import wait_until

    handler = lambda: getattr(signal.getsignal(signal.SIGTERM), "__name__", None)  # noqa: E731
    wait_until(lambda: handler() == "on_signal", what="the client's stop handler")
    os.kill(os.getpid(), signal.SIGTERM)
