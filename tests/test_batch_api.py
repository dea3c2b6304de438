"""The batch engine from Python (``processkit.batch``, in this process) and across a real Dask
``LocalCluster`` (``batch --dask-scheduler``): the same jobs, the same summaries and streams."""

from __future__ import annotations

import glob
import json
import os
import pathlib

import pytest

import processkit
from conftest import SAFETY_NET, run_cli, start_cli
from streams import check_stream, wait_until
from local_cluster import batch_on_cluster, local_cluster

JOBS = [
    {"args": ["sh", "-c", "echo a"], "id": "a"},
    {"args": ["sh", "-c", "exit 4"], "id": "b"},
    {"args": ["sleep", "30"], "id": "c", "timeout": 0.2},
]


def test_processkit_batch_runs_the_jobs_in_this_process(tmp_path):
    out = tmp_path / "out"
    lines = processkit.batch(JOBS, jobs=2, out=str(out))
    codes = {line["id"]: line["exit_code"] for line in lines}
    assert codes == {"a": 0, "b": 4, "c": 106}
    assert [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()] == lines
    for job in JOBS:
        check_stream(out / job["id"] / "events.jsonl", codes[job["id"]])
    assert (out / "a" / "capture" / "stdout.log").read_bytes() == b"a\n"
    batch_process = lines[0]["run_id"].split("-")[1]  # run-<pid>-<nanos>: the process that ran the batch
    assert batch_process != str(os.getpid()), "the batch ran in a process of the runner service's"
    assert glob.glob(f"/tmp/pkc-{batch_process}-*") == [], "every run directory is released"


def test_processkit_batch_refuses_a_bad_job_before_anything_starts(tmp_path):
    with pytest.raises(ValueError, match=r"jobs\[1\]: 'id'"):
        processkit.batch([{"args": ["true"]}, {"args": ["true"], "id": "/x"}], out=str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "given, said",
    [
        ([["echo", "a"]], 'jobs[0]: a job is a mapping (dict) with "args", not list'),
        (
            [{"args": ["true"], "id": "a"}, {"args": ["true"], "id": "a"}],
            "jobs[1]: duplicate id 'a' (first as jobs[0])",
        ),
        ([{"args": ["true"], "timout": 1}], "jobs[0]: got an unexpected keyword argument 'timout'"),
    ],
)
def test_processkit_batch_names_a_bad_job_by_its_index_in_the_list(tmp_path, given, said):
    """A Python list has no manifest line and no JSON: its bad item is named as the caller wrote it."""
    with pytest.raises(ValueError) as raised:
        processkit.batch(given, out=str(tmp_path / "out"))
    assert str(raised.value).startswith(said), raised.value
    assert "manifest" not in str(raised.value) and "JSON" not in str(raised.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "given, said",
    [
        ("jobs.jsonl", "not str: a manifest file is processkit-cli batch's"),
        ("", "not str: a manifest file"),
        (pathlib.Path("jobs.jsonl"), "not PosixPath: a manifest file"),
        ({"args": ["true"]}, "not dict: give [job]"),
    ],
)
def test_processkit_batch_refuses_a_path_or_one_job_as_what_it_is(tmp_path, given, said):
    """A manifest file's path was read as a list of its characters (``jobs[0]: a job is a mapping
    (dict) with "args", not str``), an empty one ran nothing and returned ``[]``, a lone job
    mapping was its keys: each is a TypeError naming what was given, before ``out`` is made."""
    (tmp_path / "jobs.jsonl").write_text('{"args": ["true"]}\n')
    with pytest.raises(TypeError) as raised:
        processkit.batch(given, out=str(tmp_path / "out"))
    assert str(raised.value).startswith("manifest must be a list of jobs (mappings shaped as manifest lines), "), (
        raised.value
    )
    assert said in str(raised.value), raised.value
    assert not (tmp_path / "out").exists()


def test_processkit_batch_names_an_out_it_cannot_use(tmp_path):
    """``out=None`` raised os.fspath()'s words, and a NUL a bare ``embedded null byte``, neither
    naming ``out=``: both are ``as_text``'s, as an argument's or a path keyword's of ``run``."""
    with pytest.raises(TypeError, match=r"^out= must be a string or a path, not NoneType$"):
        processkit.batch([{"args": ["true"], "id": "a"}], out=None)
    for nul in (str(tmp_path / "o\x00"), os.fsencode(tmp_path / "o\x00")):
        with pytest.raises(ValueError, match=r"^out= holds a NUL character \(at offset \d+\), which no argument"):
            processkit.batch([{"args": ["true"], "id": "a"}], out=nul)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "listed, path",
    [
        (list, os.fsencode),  # bytes raised "Can't mix strings and bytes in path components"
        (tuple, str),
        (lambda jobs: (job for job in jobs), pathlib.Path),  # a generator: read once, as a list
    ],
)
def test_processkit_batch_takes_any_iterable_of_jobs_and_out_as_any_path(tmp_path, listed, path):
    lines = processkit.batch(listed([{"args": ["true"], "id": "a"}]), out=path(tmp_path / "out"))
    assert [(line["id"], line["exit_code"]) for line in lines] == [("a", 0)]
    check_stream(tmp_path / "out" / "a" / "events.jsonl", 0)


@pytest.mark.parametrize("keyword", [{"jobs": -1}, {"jobs": 4097}, {"retries": -1}])
def test_processkit_batch_refuses_a_count_that_would_start_no_job(tmp_path, keyword):
    """``jobs=-1`` recorded every job ``halted`` and returned as a batch; it is refused as the
    CLI's ``--jobs -1`` is, in one line naming the keyword, before ``out`` is made."""
    (name,) = keyword
    with pytest.raises(ValueError, match=f"^invalid value -?[0-9]+ for '{name}=': expected a whole number") as raised:
        processkit.batch([{"args": ["true"]}], out=str(tmp_path / "out"), **keyword)
    assert "\n" not in str(raised.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("keyword", [{"jobs": None}, {"retries": None}])
def test_processkit_batch_takes_none_as_the_default_count(tmp_path, keyword):
    """``retries=None`` ran before the counts were checked and then raised a raw TypeError from
    a comparison: None is the default for ``retries`` as for ``jobs``."""
    lines = processkit.batch([{"args": ["true"], "id": "a"}], out=str(tmp_path / "out"), **keyword)
    assert [(line["id"], line["exit_code"], line["attempts"]) for line in lines] == [("a", 0, 1)]


def test_the_dask_path_runs_every_job_on_the_workers(tmp_path):
    distributed = pytest.importorskip("distributed")
    jobs = [{"args": ["sh", "-c", f"echo {n}; exit {n % 3}"], "id": f"j{n}"} for n in range(12)]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    out = tmp_path / "out"
    with local_cluster(n_workers=2, threads_per_worker=1, processes=True) as cluster:
        proc = run_cli(
            "batch", manifest, "--out", out, "--jobs", "2", "--dask-scheduler", cluster.scheduler_address, timeout=120
        )
        with distributed.Client(cluster) as client:
            worker_pids = list(client.run(os.getpid).values())
    assert proc.returncode == 117, proc.stderr
    lines = {line["id"]: line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}
    assert {key: line["exit_code"] for key, line in lines.items()} == {f"j{n}": n % 3 for n in range(12)}
    for n in range(12):
        check_stream(out / f"j{n}" / "events.jsonl", n % 3)
        assert (out / f"j{n}" / "capture" / "stdout.log").read_bytes() == f"{n}\n".encode()
    assert (out / "index.html").exists()
    runners = {int(path.split("/pkc-")[1].split("-")[0]) for path in glob.glob("/tmp/pkc-*")}
    assert not runners & set(worker_pids), "the workers released every run directory"


def test_a_dask_task_that_fails_as_a_whole_gives_its_jobs_a_line_and_the_rest_go_on(tmp_path):
    """A job that kills the worker it runs in (the batch engine runs in the worker's process)
    fails its task; with no retry allowed the client gets the task's failure. Dask also fails
    the tasks it had queued on that worker, so those may share the fate: every job still gets a
    line, each failed task a warning, and the jobs on the surviving worker run."""
    pytest.importorskip("distributed")

    jobs = [{"args": ["sh", "-c", "echo ok"], "id": f"ok{n}"} for n in range(5)]
    jobs.insert(1, {"args": ["sh", "-c", "kill -9 $PPID; sleep 30"], "id": "killer"})
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    out = tmp_path / "out"
    proc = batch_on_cluster(manifest, out, "--junit", out / "j.xml", n_workers=2, allowed_failures=0)
    assert proc.returncode == 117, proc.stderr
    lines = {line["id"]: line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}
    assert sorted(lines) == sorted(job["id"] for job in jobs)
    assert (lines["killer"]["exit_code"], lines["killer"]["source"]) == (None, "task_failed")
    # why, where CI reads it (the line, the page, the JUnit), not only on the client's stderr
    why = lines["killer"]["message"]
    assert why.startswith("its Dask task failed: ") and why[len("its Dask task failed: ") :] in proc.stderr.decode()
    assert 'type="task_failed">its Dask task failed: ' in (out / "j.xml").read_text()
    failed = [key for key, line in lines.items() if line["source"] == "task_failed"]
    assert all(lines[key]["exit_code"] == 0 for key in lines if key not in failed)
    assert len(failed) < len(jobs) - 1, "the jobs on the surviving worker ran"
    assert proc.stderr.count(b"warning: a Dask task of 1 job failed: ") == len(failed), proc.stderr
    assert (out / "index.html").exists()
    assert run_cli("prune").returncode == 0  # what the killed worker's batch engine left


def test_a_stop_signal_to_a_dask_batch_cancels_the_jobs_running_on_the_workers(tmp_path):
    """Dask cannot stop a running task: the client tells each worker's running chunk to stop,
    so the jobs there end with their cancellation (as run's would), the chunks not begun start
    nothing, every job gets a line, and nothing the jobs started outlives the batch."""
    pytest.importorskip("distributed")
    import signal
    import subprocess

    marker = "30.0417"  # an argument no other process has
    jobs = [{"args": ["sleep", marker], "id": f"s{n}"} for n in range(6)]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    out = tmp_path / "out"
    with local_cluster(n_workers=2, threads_per_worker=1, processes=True) as cluster:
        batch = start_cli("batch", manifest, "--out", out, "--dask-scheduler", cluster.scheduler_address)
        try:
            running = [f"s{n}" for n in range(6)]  # one job running on each worker:
            wait_until(lambda: len(_started(out, running)) >= 2, what="two jobs started on the workers")
            started = [int(name[1:]) for name in _started(out, running)]
            batch.send_signal(signal.SIGTERM)
            _, err = batch.communicate(timeout=2 * SAFETY_NET)
        finally:
            batch.kill()
        survivors = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True).stdout
    assert batch.returncode == 107, err
    assert "cancelled by SIGTERM" in err.decode().splitlines()[-1]
    lines = {line["id"]: line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}
    assert sorted(lines) == [f"s{n}" for n in range(6)]
    for n in started:
        events = check_stream(out / f"s{n}" / "events.jsonl", 107)
        assert [e["source"] for e in events if e["event"] == "cancelled"] == ["sigterm"]
        assert lines[f"s{n}"]["exit_code"] == 107
    for key, line in lines.items():
        if int(key[1:]) not in started:
            assert (line["exit_code"], line["source"]) in ((None, "cancelled"), (107, "cancelled")), line
    assert survivors == b"", survivors


def test_a_dask_worker_killed_mid_batch_leaves_every_summary_line_true_to_its_stream(tmp_path):
    """Two threads per worker, so one worker's process runs two chunks (two hosts) at once,
    under process-group containment; one worker is SIGKILLed mid-batch and Dask reschedules
    its chunks. Every job's summary line says what its stream says: a job whose stream ends
    with ``runner_exit`` has that code (the lost pin count made exited jobs ``task_failed``)."""
    distributed = pytest.importorskip("distributed")
    import signal

    count = 32
    jobs = [{"args": ["sh", "-c", f"sleep 0.2; echo {n}"], "id": f"j{n}"} for n in range(count)]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    out = tmp_path / "out"
    forced = {"PROCESSKIT_CONTAINMENT": "process_group"}
    with local_cluster(n_workers=2, threads_per_worker=2, processes=True, env=forced) as cluster:
        with distributed.Client(cluster) as client:
            victim = sorted(client.run(os.getpid).values())[0]
        batch = start_cli(
            "batch", manifest, "--out", out, "--jobs", "2", "--dask-scheduler", cluster.scheduler_address,
            env={**os.environ, **forced},
        )  # fmt: skip
        try:
            wait_until(
                lambda: batch.poll() is not None or len(_started(out, [f"j{n}" for n in range(count)])) >= 6,
                what="six jobs started",
            )
            assert batch.poll() is None, "the batch ended before its jobs started"
            os.kill(victim, signal.SIGKILL)
            _, err = batch.communicate(timeout=2 * SAFETY_NET)
        finally:
            batch.kill()
    lines = {line["id"]: line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}
    assert sorted(lines) == sorted(job["id"] for job in jobs), err
    for key, line in lines.items():
        stream = _read(out / key / "events.jsonl").splitlines()
        last = json.loads(stream[-1]) if stream else {}
        if last.get("event") == "runner_exit":
            assert (line["exit_code"], line["source"]) == (last["code"], last["source"]), (key, line, err)
        else:
            assert line["exit_code"] is None, (key, line)
    assert sum(line["exit_code"] == 0 for line in lines.values()) >= count - 4, err


def _started(out, names: list[str]) -> list[str]:
    """The jobs among ``names`` whose stream says their run started."""
    return [name for name in names if b"run_started" in _read(out / name / "events.jsonl")]


def _read(path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


@pytest.mark.parametrize(
    "address, code, message",
    [
        ("nonsense://x", 100, b"invalid value 'nonsense://x' for '--dask-scheduler <ADDRESS>': unknown address scheme"),
        ("tcp://127.0.0.1:9", 111, b"cannot reach the Dask scheduler at tcp://127.0.0.1:9: "),
    ],
)
def test_a_scheduler_that_cannot_be_used_is_one_line_and_leaves_no_out(tmp_path, address, code, message):
    pytest.importorskip("distributed")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"args": ["true"]}) + "\n")
    out = tmp_path / "out"
    env = {**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"}
    proc = run_cli("batch", manifest, "--out", out, "--dask-scheduler", address, env=env, timeout=60)
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.startswith(b"processkit-cli: " + message) and proc.stderr.count(b"\n") == 1, proc.stderr
    assert not out.exists()


CALLER_WITH_CHILDREN = """
import ctypes, json, os, signal, subprocess, sys
import processkit

handlers = {n: signal.getsignal(n) for n in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)}
early = subprocess.Popen(["sh", "-c", "exit 7"])  # exited and unwaited before the batch
while not os.waitid(os.P_PID, early.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
    pass
during = [subprocess.Popen(["sh", "-c", f"sleep 0.{n}; exit {n + 10}"]) for n in range(1, 4)]  # exit mid-batch
jobs = [{"args": ["sh", "-c", f"sleep 0.{n}; exit {n}"], "id": f"j{n}"} for n in range(6)]
lines = processkit.batch(jobs, jobs=3, out=sys.argv[1])
flag = ctypes.c_int(-1)
ctypes.CDLL(None, use_errno=True).prctl(37, ctypes.byref(flag), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER
print(json.dumps({
    "jobs": {line["id"]: line["exit_code"] for line in lines},
    "own": [early.wait(timeout=60)] + [child.wait(timeout=60) for child in during],
    "subreaper": flag.value,
    "handlers_kept": all(signal.getsignal(n) is h for n, h in handlers.items()),
}))
"""


def test_processkit_batch_leaves_the_callers_own_children_alone(tmp_path, containment):
    """The batch collects only the roots it spawned, by pid: a child the calling program
    started (exited before the batch, or during it) keeps its status for the program (a reaper
    peeking at every exited child would take it, and Popen would then report 0), whatever the
    containment; and the caller's process keeps its signal handlers and is made no subreaper."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", CALLER_WITH_CHILDREN, str(tmp_path / "out")], capture_output=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    events = check_stream(tmp_path / "out" / "j0" / "events.jsonl", 0)
    assert events[0]["mechanism"] == containment or containment == "cgroup_v2"
    assert found["jobs"] == {f"j{n}": n for n in range(6)}
    assert found["own"] == [7, 11, 12, 13]
    assert found["subreaper"] == 0 and found["handlers_kept"]


def test_a_batch_reads_each_jobs_figures_once(tmp_path, monkeypatch):
    """The summary line takes the whole tree's figures read at the stream's resource_summary read
    point: the second read that ``run`` makes once the tree is gone (its Outcome's usage, for
    --usage-file) is not made per job. The batch
    engine is driven here in this process, where the counter can be replaced (processkit.batch
    runs it in a process of the runner service's)."""
    from processkit.batching.on_host import Settings, run_batch
    from processkit.batching.manifest import jobs_from
    from processkit.containment.base import Container

    def second_read(self, read):
        raise AssertionError("a batch job's figures were read again after its teardown")

    monkeypatch.setattr(Container, "final_usage", second_read)
    lines, _ = run_batch(
        jobs_from([{"args": ["true"], "id": "once"}]), Settings(str(tmp_path / "out"), 1), signals=False
    )
    assert [(line.id, line.exit_code) for line in lines] == [("once", 0)]
    assert lines[0].resources is not None


def test_a_batch_whose_service_cannot_start_leaves_no_socket_open(tmp_path, monkeypatch):
    """The batch's own socketpair is made before the request is sent: a service that could not
    start (``ServiceUnstartable``) left the caller's end open until the error was collected."""
    from processkit.api import service, shared

    def unstartable(*_, **__):
        raise service.ServiceUnstartable("no scratch directory anywhere")

    monkeypatch.setattr(shared, "send", unstartable)
    before = set(os.listdir("/proc/self/fd"))
    with pytest.raises(service.ServiceUnstartable) as raised:
        processkit.batch([{"args": ["true"]}], out=str(tmp_path / "out"))
    # while the caller holds the error (its traceback, the batch's frame): not left to the collector
    assert set(os.listdir("/proc/self/fd")) - before == set(), raised
