"""The API's other entry points in a Dask task whose driver got Ctrl-C: like ``processkit.run``'s,
a ``start``ed run waited for (``wait``), an ``asyncio.run(run_async(...))`` on the task's thread,
an ``async def`` task's awaited ``run_async`` (Dask does not cancel such a task it lets go), a
``processkit.batch`` (its socket past descriptor 1023, where ``select`` refused it) and a
``processkit.bench`` stop once Dask lets the task go, as a gone caller's (``cancelled``, source
``sighup``, 107). They ran on to their own timeout, for a result nobody takes. But a run is stopped only by its own task's wait: a task that waits on a run
another task started (a worker-wide daemon) leaves it running when it is let go. One real
``LocalCluster``, real drivers."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import pytest

from conftest import SAFETY_NET, wait_for_event, wait_for_file
from local_cluster import local_cluster

KINDS = ["start", "run_async", "async_def", "batch", "bench"]

DRIVER = textwrap.dedent("""
    import asyncio, os, resource, sys, distributed, processkit
    address, where = sys.argv[1:]

    def args(kind):
        return ["sh", "-c", f"touch {where}/began-{kind}; exec sleep 60.0733"]

    def task(kind):
        if kind == "start":
            return processkit.start(args(kind), jsonl=f"{where}/start.jsonl", timeout="30s").wait()
        if kind == "run_async":
            run = processkit.run_async(args(kind), jsonl=f"{where}/run_async.jsonl", timeout="30s")
            return asyncio.run(run).returncode
        if kind == "bench":
            return processkit.bench([args(kind)], runs=1, warmup=0, timeout="30s", jsonl_dir=f"{where}/bench")
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
        held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1024)]  # its socket past select's range
        try:
            return processkit.batch([{"id": "j", "args": args(kind), "timeout": "30s"}], out=f"{where}/batch")
        finally:
            for fd in held:
                os.close(fd)

    async def awaited():
        run = processkit.run_async(args("async_def"), jsonl=f"{where}/async_def.jsonl", timeout="30s")
        return (await run).returncode

    with distributed.Client(address) as client:
        kinds = ["start", "run_async", "batch", "bench"]
        futures = [client.submit(task, kind, pure=False) for kind in kinds]
        distributed.wait(futures + [client.submit(awaited, pure=False)])
""")


@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("distributed")
    with local_cluster(n_workers=1, threads_per_worker=len(KINDS), processes=True) as made:
        yield made


def test_api_calls_in_dask_tasks_whose_driver_got_ctrl_c_are_cancelled(tmp_path, cluster):
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, cluster.scheduler_address, str(tmp_path)], stderr=subprocess.PIPE
    )
    for kind in KINDS:
        wait_for_file(tmp_path / f"began-{kind}")
    driver.send_signal(signal.SIGINT)
    driver.communicate(timeout=SAFETY_NET)
    for kind in KINDS:
        if kind == "batch":
            events = tmp_path / "batch" / "j" / "events.jsonl"
        elif kind == "bench":
            events = next((tmp_path / "bench").glob("*.jsonl"))
        else:
            events = tmp_path / f"{kind}.jsonl"
        ended = wait_for_event(events, "runner_exit")
        assert (ended["code"], ended["source"]) == (107, "cancelled"), (kind, ended)
        assert wait_for_event(events, "cancelled")["source"] == "sighup", kind


SHARED = textwrap.dedent("""
    import builtins, os, subprocess, sys, time, distributed, processkit
    address, where = sys.argv[1:]

    def until(ready):
        deadline = time.monotonic() + 60
        while not ready():
            assert time.monotonic() < deadline
            time.sleep(0.01)

    def start_daemon():
        args = ["sh", "-c", "exec sleep 60.0737"]
        builtins.processkit_test_daemon = processkit.start(args, jsonl=f"{where}/daemon.jsonl")

    def tick(count):
        with open(f"{where}/ticks.new", "w") as file:
            file.write(str(count))
        os.replace(f"{where}/ticks.new", f"{where}/ticks")

    def check_alive():
        daemon, count = builtins.processkit_test_daemon, 0
        tick(count)
        while not os.path.exists(f"{where}/done"):
            try:
                daemon.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                pass
            count += 1
            tick(count)
        tick(-1)  # its last wait over

    def ticks():
        with open(f"{where}/ticks") as file:
            return int(file.read())

    def stop_daemon():
        daemon = builtins.processkit_test_daemon
        daemon.kill()
        return daemon.wait()

    def let_go(key, dask_worker=None):
        task = dask_worker.state.tasks.get(key)
        return task is None or task.state == "cancelled"

    with distributed.Client(address) as client:
        client.submit(start_daemon, pure=False).result()
        checker = client.submit(check_alive, pure=False)
        until(lambda: os.path.exists(f"{where}/ticks"))
        client.cancel(checker)
        until(lambda: all(client.run(let_go, checker.key).values()))
        seen = ticks()
        until(lambda: ticks() >= seen + 2)  # a wait begun after the worker let the checker go
        open(f"{where}/done", "w").close()
        until(lambda: ticks() == -1)
        print(client.submit(stop_daemon, pure=False).result())
""")


def test_a_dask_task_let_go_while_it_waits_on_a_run_another_task_started_leaves_that_run(tmp_path, cluster):
    """docs/fleet.md: one task ``start``s a worker-wide daemon and returns; another waits on it and
    is cancelled. The daemon runs on until it is killed (-9); the waiter's cancel stopped it
    (``cancelled``, ``sighup``), for the task that only looked at it."""
    done = subprocess.run(
        [sys.executable, "-c", SHARED, cluster.scheduler_address, str(tmp_path)],
        capture_output=True,
        timeout=SAFETY_NET,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == b"-9", done.stdout
    events = tmp_path / "daemon.jsonl"
    wait_for_event(events, "runner_exit")
    names = [json.loads(line)["event"] for line in events.read_text().splitlines()]
    assert "cancelled" not in names, names
