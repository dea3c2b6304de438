"""The API's other entry points in a Dask task whose driver got Ctrl-C: like ``processkit.run``'s,
a ``start``ed run waited for (``wait``), an ``asyncio.run(run_async(...))`` on the task's thread,
an ``async def`` task's awaited ``run_async`` (Dask does not cancel such a task it lets go) and a
``processkit.batch`` stop once Dask lets the task go, as a gone caller's (``cancelled``, source
``sighup``, 107). They ran on to their own timeout, for a result nobody takes. One real
``LocalCluster``, real drivers."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

from conftest import SAFETY_NET, wait_for_event, wait_for_file
from local_cluster import local_cluster

DRIVER = textwrap.dedent("""
    import asyncio, sys, distributed, processkit
    kind, address, began, where = sys.argv[1:]
    args = ["sh", "-c", f"touch {began}; exec sleep 60.0733"]

    def task():
        if kind == "start":
            return processkit.start(args, jsonl=f"{where}/run.jsonl", timeout="30s").wait()
        if kind == "run_async":
            return asyncio.run(processkit.run_async(args, jsonl=f"{where}/run.jsonl", timeout="30s")).returncode
        return processkit.batch([{"id": "j", "args": args, "timeout": "30s"}], out=f"{where}/out")

    async def awaited():
        return (await processkit.run_async(args, jsonl=f"{where}/run.jsonl", timeout="30s")).returncode

    with distributed.Client(address) as client:
        client.submit(awaited if kind == "async_def" else task, pure=False).result()
""")


@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("distributed")
    with local_cluster(n_workers=1, threads_per_worker=3, processes=True) as made:
        yield made


@pytest.mark.parametrize("kind", ["start", "run_async", "async_def", "batch"])
def test_an_api_call_in_a_dask_task_whose_driver_got_ctrl_c_is_cancelled(tmp_path, cluster, kind):
    began = tmp_path / "began"
    address = cluster.scheduler_address
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, kind, address, str(began), str(tmp_path)], stderr=subprocess.PIPE
    )
    wait_for_file(began)
    driver.send_signal(signal.SIGINT)
    driver.communicate(timeout=SAFETY_NET)
    events = tmp_path / ("out/j/events.jsonl" if kind == "batch" else "run.jsonl")
    ended = wait_for_event(events, "runner_exit")
    assert (ended["code"], ended["source"]) == (107, "cancelled"), ended
    assert wait_for_event(events, "cancelled")["source"] == "sighup"
