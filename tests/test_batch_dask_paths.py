"""The Dask path's edges (issues 45 and 46): a stop signal that lands while a task's lines are
being recorded loses none of them; a worker serving batch after batch keeps no table entry per
batch; a scheduler address whose transport cannot be set up here is one line, never a 104."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading

import pytest

from conftest import pid_alive, run_cli
from streams import wait_until
from local_cluster import local_cluster

distributed = pytest.importorskip("distributed")


@pytest.mark.parametrize(
    "address, words",
    [
        ("tls://127.0.0.1:9", b"distributed.comm.tls.client"),
        ("ucx://127.0.0.1:9", b"distributed-ucxx"),
    ],
)
def test_a_scheduler_transport_that_cannot_be_set_up_is_one_line(tmp_path, address, words):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"args": ["true"]}) + "\n")
    out = tmp_path / "out"
    env = {**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"}
    proc = run_cli("batch", manifest, "--out", out, "--dask-scheduler", address, env=env, timeout=60)
    assert proc.returncode == 111, proc.stderr
    assert proc.stderr.startswith(b"processkit-cli: cannot connect to the Dask scheduler at " + address.encode())
    assert words in proc.stderr and proc.stderr.count(b"\n") == 1, proc.stderr
    assert not out.exists()


def _signal_after_the_first_line(monkeypatch) -> list[bool]:
    """The client's recorder sends this process SIGTERM once it has recorded its first line (its
    handler runs before the next line is recorded); the list says whether it was sent."""
    from processkit.batching.recorder import Recorder

    record = Recorder.record
    sent: list[bool] = []

    def record_then_signal(self, line) -> None:
        record(self, line)
        if not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(Recorder, "record", record_then_signal)
    return sent


def test_a_stop_signal_while_a_tasks_lines_are_recorded_loses_none(tmp_path, monkeypatch):
    """SIGTERM arrives inside the recording of the first task that comes back: the stop is
    held until that task's lines are all written, then the batch stops; every job has one line."""
    from processkit.batching import chunk, fleet
    from processkit.batching.manifest import jobs_from
    from processkit.batching.on_host import Settings

    sent = _signal_after_the_first_line(monkeypatch)
    jobs = jobs_from([{"args": ["true"], "id": f"j{n}"} for n in range(8)])
    out = tmp_path / "out"
    with local_cluster(n_workers=1, threads_per_worker=1, processes=True) as cluster:
        _, counts = fleet.run_on_dask(cluster.scheduler_address, jobs, Settings(str(out), 1))
        with distributed.Client(cluster) as client:
            left = client.run(lambda: (dict(chunk._stopped), dict(chunk._running)))
    assert sent and counts.cancelled_by == "sigterm"
    ids = [json.loads(line)["id"] for line in (out / "summary.jsonl").read_text().splitlines()]
    assert sorted(ids) == sorted(f"j{n}" for n in range(8)), ids
    assert list(left.values()) == [({}, {})], "the worker keeps nothing of the batch once it is over"


def test_every_setting_of_the_batch_reaches_its_chunks(tmp_path, monkeypatch):
    """The chunks' settings are the batch's own (a positional rebuild dropped ``memory_budget``):
    only ``--out`` (as the client resolved it) and ``--resume`` (decided by the client) differ."""
    from processkit.batching import fleet
    from processkit.batching.ci import RetryDelay
    from processkit.batching.manifest import jobs_from
    from processkit.batching.on_host import Settings

    sent: list = []
    connect = fleet.connect

    class Recording:
        """The real client, its submissions noted."""

        def __init__(self, client):
            self._client = client

        def submit(self, function, jobs, settings, *rest, **keywords):
            sent.append(settings)
            return self._client.submit(function, jobs, settings, *rest, **keywords)

        def __getattr__(self, name):
            return getattr(self._client, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self._client.__exit__(*exc)

    monkeypatch.setattr(fleet, "connect", lambda address: Recording(connect(address)))
    given = Settings(
        str(tmp_path / "out"),
        2,
        retries=1,
        resume=True,
        memory_budget=512 << 20,
        peaks={"j0": 1 << 20},
        keep_failed_only=True,
        took={"j0": 0.5},
        retry_delay=RetryDelay(10, False),
    )
    with local_cluster(n_workers=1, threads_per_worker=1, processes=True) as cluster:
        _, counts = fleet.run_on_dask(cluster.scheduler_address, jobs_from([{"args": ["true"], "id": "j0"}]), given)
    assert counts.succeeded == 1 and len(sent) == 1
    chunk = sent[0]
    assert chunk.memory_budget == 512 << 20, "the budget reaches the chunk's batch"
    assert (chunk.out, chunk.resume) == (str(tmp_path / "out"), False)
    for name in Settings.__slots__:
        if name not in ("out", "resume"):
            assert getattr(chunk, name) == getattr(given, name), name


def test_a_summary_that_cannot_be_written_ends_the_jobs_running_on_the_workers(tmp_path, small_tmpfs):
    """A full disk under ``--out`` while another task's job runs on a worker: the client exited
    111 and left that job running there (docs/batch.md: running jobs are ended first). Now the
    workers are told to stop the batch, and the client waits for its tasks before it exits."""
    out_fs = small_tmpfs("out", "size=64k")
    pid_file = tmp_path / "slow.pid"
    fill = f"while [ ! -s {pid_file} ]; do sleep 0.01; done; head -c 200000 /dev/zero > {out_fs / 'filler'}; exit 1"
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        json.dumps(
            {
                "id": "slow",
                "args": ["sh", "-c", f"echo $$ > {pid_file}.new; mv {pid_file}.new {pid_file}; exec sleep 120"],
            }
        )
        + "\n"
        + json.dumps({"id": "filler", "args": ["sh", "-c", fill]})
        + "\n"
    )
    slow = None
    with local_cluster(n_workers=1, threads_per_worker=2, processes=True) as cluster:
        try:
            proc = run_cli(
                "batch", manifest, "--out", out_fs / "o", "--dask-scheduler", cluster.scheduler_address, timeout=120
            )
            slow = int(pid_file.read_text())
            assert proc.returncode == 111, proc.stderr
            assert b"cannot write " in proc.stderr, proc.stderr
            assert not pid_alive(slow), "the job on the worker outlived the batch"
        finally:
            if slow is not None and pid_alive(slow):
                os.kill(slow, signal.SIGKILL)  # the unfixed client's leftover: ours, ended by pid


def _batch_meeting(tmp_path, monkeypatch, first, then):
    """A Dask batch of 8 jobs (4 tasks of 2) whose recorder does ``first`` after the first line
    it records and ``then`` after the third (the next task's first); returns the failure the batch raised, the worker's
    tables once it is over, and the stop's source."""
    from processkit.batching import chunk, fleet
    from processkit.batching.manifest import jobs_from
    from processkit.batching.on_host import Settings
    from processkit.batching.recorder import Recorder
    from processkit.errors import Failure

    record = Recorder.record
    done: list[bool] = []
    steps = {1: first, 3: then}

    def record_then(self, line) -> None:
        record(self, line)
        done.append(True)
        steps.get(len(done), lambda: None)()

    monkeypatch.setattr(Recorder, "record", record_then)
    forget, out = fleet._Tasks.forget, []

    def counted(self) -> None:  # how many tasks were out as the client let the batch go
        out.append(sum(not future.done() for future in self.futures))
        forget(self)

    monkeypatch.setattr(fleet._Tasks, "forget", counted)
    jobs = jobs_from([{"args": ["true"], "id": f"j{n}"} for n in range(8)])
    with local_cluster(n_workers=1, threads_per_worker=1, processes=True) as cluster:
        with pytest.raises(Failure) as failed:
            fleet.run_on_dask(cluster.scheduler_address, jobs, Settings(str(tmp_path / "out"), 1))
        with distributed.Client(cluster) as client:  # a task out when the client left still ends its chunk
            wait_until(lambda: not any(client.run(lambda: chunk._running).values()), what="the worker's chunks ending")
            left = client.run(lambda: (dict(chunk._stopped), dict(chunk._running)))
    assert len(done) >= 3 and len(out) == 1
    return failed.value, (list(left.values()), out[0])


def _kept_only_while_out(left: tuple[list, int], source: str) -> None:
    """The worker runs no chunk of the batch, and keeps the batch's stop (``source``) only when a
    task was still out as the client left (that task starts nothing should it begin later)."""
    tables, out = left
    assert [running for _, running in tables] == [{}], tables
    assert [sorted(stopped.values()) for stopped, _ in tables] == [[source] if out else []], (tables, out)


def _stop_signal() -> None:
    os.kill(os.getpid(), signal.SIGTERM)  # held while the task's lines are recorded, then raised


def _summary_fails() -> None:
    from processkit.errors import Failure, Kind

    raise Failure(Kind.SETUP, "cannot write summary.jsonl: No space left on device")


def test_a_summary_failure_during_a_stops_wind_down_still_tells_the_workers_it_is_over(tmp_path, monkeypatch):
    """The summary failed while a stop's tasks were waited for: the failure left at once,
    skipping the bounded wait and ``forget_stop``, and the worker kept the batch's stop."""
    from processkit.batching import fleet

    wind_down = fleet._Tasks.wind_down
    calls: list[str] = []

    def counted(self, source, grace_s, held):
        calls.append(source)
        wind_down(self, source, grace_s, held)

    monkeypatch.setattr(fleet._Tasks, "wind_down", counted)
    failure, left = _batch_meeting(tmp_path, monkeypatch, _stop_signal, _summary_fails)
    assert "No space left" in failure.message
    _kept_only_while_out(left, "sigterm")
    assert calls == ["sigterm"], "the failure inside the stop's wind-down is not wound down again (a doubled wait)"


def test_a_stop_signal_while_a_failed_batch_winds_down_is_said_as_such(tmp_path, monkeypatch, capfd):
    """A stop signal while the failed batch's tasks were waited for was caught as an error and
    said as 'the Dask workers were not all told to stop the failed batch: Stopping'."""
    failure, left = _batch_meeting(tmp_path, monkeypatch, _summary_fails, _stop_signal)
    assert "No space left" in failure.message
    err = capfd.readouterr().err
    assert "Stopping" not in err and "not all told" not in err, err
    assert "a stop signal ended the wait for the failed batch's Dask tasks" in err, err
    _kept_only_while_out(left, "internal")


def test_a_task_still_out_when_a_stopped_batch_is_over_starts_none_of_its_jobs(tmp_path, monkeypatch):
    """A stopped batch whose wait for its tasks ran out: the client cancelled those still out and
    told the workers to forget the stop, so a task begun on a worker that had not yet looked at
    the stops (its chunk asking the scheduler whether the batch halted) found none and ran its
    jobs, recorded as cancelled, for a batch that was over. Here the scheduler holds that question
    from the second task on until the client is done, and the wait is cut to nothing: the held
    task starts no job, and the worker keeps the stop (the tasks not back could still begin)."""
    from processkit.batching import chunk, fleet
    from processkit.batching.manifest import jobs_from
    from processkit.batching.on_host import Settings

    sent = _signal_after_the_first_line(monkeypatch)  # a stop once the first task is back
    monkeypatch.setattr(fleet, "WIND_DOWN_S", 0)  # the wait for the tasks still out ran out
    ran = tmp_path / "ran"
    ran.mkdir()
    jobs = jobs_from([{"args": ["touch", str(ran / f"j{n}")], "id": f"j{n}"} for n in range(8)])
    asked: list[str] = []
    release = threading.Event()
    with local_cluster(n_workers=1, threads_per_worker=1, processes=True) as cluster:
        answer = cluster.scheduler.handlers["event_is_set"]

        async def held(name=None):
            asked.append(name)
            if len(asked) > 1:  # the first task's answered; the next ones wait for the client to be done
                await asyncio.get_running_loop().run_in_executor(None, release.wait)
            return answer(name=name)

        cluster.scheduler.handlers["event_is_set"] = held
        settings = Settings(str(tmp_path / "out"), 1, halt_on_failure=True, label="batch-held")
        try:
            _, counts = fleet.run_on_dask(cluster.scheduler_address, jobs, settings)
        finally:
            release.set()
        with distributed.Client(cluster) as client:
            wait_until(
                lambda: not any(client.run(lambda dask_worker: len(dask_worker.state.tasks)).values()),
                what="the worker done with the batch's tasks",
            )
            left = client.run(lambda: (dict(chunk._stopped), dict(chunk._running)))
    assert sent and counts.cancelled_by == "sigterm" and len(asked) > 1
    assert sorted(path.name for path in ran.iterdir()) == ["j0", "j1"], "a job started after the batch was over"
    assert list(left.values()) == [({"batch-held": "sigterm"}, {})]


def test_a_relative_out_is_the_clients_directory_on_every_worker(tmp_path, monkeypatch):
    """``--out`` relative (the default ``batch-out`` too) was sent to the workers as written, so
    each made it in its own working directory: on a cluster whose workers started elsewhere the
    jobs' streams and captures went there, the client's summary and page named files it did not
    have, and nothing said so. The client sends the directory it means; the lines (summary,
    terminal, page) still name the files under ``--out`` as written, as one host's do, their
    paths and their messages (one naming the worker's absolute ``--out`` once)."""
    workers, client = tmp_path / "workers", tmp_path / "client"
    workers.mkdir()
    client.mkdir()
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"args": ["sh", "-c", "echo said; exit 3"], "id": "job"}) + "\n")
    monkeypatch.chdir(workers)  # the workers' working directory, not the client's
    with local_cluster(n_workers=1, threads_per_worker=1, processes=True) as cluster:
        proc = run_cli(
            "batch", manifest, "--out", "out", "--dask-scheduler", cluster.scheduler_address, cwd=client, timeout=120
        )
    assert proc.returncode == 117, proc.stderr
    assert (client / "out" / "job" / "capture" / "stdout.log").read_bytes() == b"said\n"
    assert b"    | said\n" in proc.stderr, proc.stderr  # the failed job's output, named at the end
    assert list(workers.iterdir()) == []
    (client / "out2").mkdir()
    (client / "out2" / "blocked").write_text("")  # a file where its job's directory goes
    manifest.write_text(json.dumps({"args": ["true"], "id": "blocked"}) + "\n")
    with local_cluster(n_workers=1, threads_per_worker=1, processes=True) as cluster:
        blocked = run_cli(
            "batch", manifest, "--out", "out2", "--dask-scheduler", cluster.scheduler_address, cwd=client, timeout=120
        )
    message = json.loads((client / "out2" / "summary.jsonl").read_text())["message"]
    assert message.startswith("cannot use the job directory out2/blocked: "), (message, blocked.stderr)
    # named as on one host, under --out as written (the worker opened them under the client's directory)
    assert b"    stdout: out/job/capture/stdout.log\n" in proc.stderr, proc.stderr
    capture = json.loads((client / "out" / "summary.jsonl").read_text())["capture"]
    assert [capture[name]["path"] for name in ("stdout", "stderr")] == [
        f"out/job/capture/{name}.log" for name in ("stdout", "stderr")
    ]


def test_a_line_read_back_from_a_failed_tasks_stream_names_a_relative_out_as_written(tmp_path):
    """A task that failed as a whole gives a job whose stream ended the line read from that
    stream, whose capture paths are the ones the worker wrote: under the client's directory, so
    absolute, where every other line names them under ``--out`` as written."""
    import dask

    client = tmp_path / "client"
    client.mkdir()
    jobs = [
        {"args": ["sh", "-c", "echo said; exit 3"], "id": "ended"},
        {"args": ["sh", "-c", "kill -9 $PPID; sleep 30"], "id": "killer"},
        *({"args": ["true"], "id": f"j{n}"} for n in range(3)),
    ]  # one worker: chunks of two, ``ended`` and ``killer`` together
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with local_cluster(n_workers=1, threads_per_worker=1, processes=True) as cluster:
            proc = run_cli(
                "batch", manifest, "--out", "out", "--jobs", "1", "--dask-scheduler", cluster.scheduler_address,
                cwd=client, timeout=120,
            )  # fmt: skip
    assert proc.returncode == 117, proc.stderr
    assert b"(1 of them had ended: its line is read from its stream)" in proc.stderr, proc.stderr
    lines = {line["id"]: line for line in map(json.loads, (client / "out" / "summary.jsonl").read_text().splitlines())}
    assert lines["ended"]["exit_code"] == 3 and lines["killer"]["source"] == "task_failed", lines
    assert lines["ended"]["capture"]["stdout"]["path"] == "out/ended/capture/stdout.log", lines["ended"]
    assert run_cli("prune").returncode == 0  # what the killed worker's batch engine left


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh-out", "out-with-an-earlier-batch"])
def test_a_chunk_drops_earlier_attempts_only_where_out_held_an_earlier_batch(tmp_path, monkeypatch, fresh):
    """A chunk's own look at ``--out`` always found it used (the client's summary, the task's
    ``.dask-began`` record), so every job's first attempt looked for an earlier batch's
    ``attempt-N/`` to drop, even in a fresh ``--out``. The chunk now has the client's look, made
    before anything was there: the drop step is taken for no job of a fresh ``--out``, and for
    each where an earlier batch left its files. Counted on an in-process worker (its threads run
    the chunks in this process, so the step's calls are seen here)."""
    from processkit.batching import attempt, fleet
    from processkit.batching.manifest import jobs_from
    from processkit.batching.on_host import Settings

    drops: list[str] = []
    drop = attempt.drop_earlier_attempts
    monkeypatch.setattr(attempt, "drop_earlier_attempts", lambda directory: (drops.append(directory), drop(directory)))
    out = tmp_path / "out"
    if not fresh:
        out.mkdir()
        (out / "summary.jsonl").write_text("")  # an earlier batch's
    jobs = jobs_from([{"args": ["true"], "id": f"j{n}"} for n in range(3)])
    with local_cluster(n_workers=1, threads_per_worker=1, processes=False) as cluster:
        _, counts = fleet.run_on_dask(cluster.scheduler_address, jobs, Settings(str(out), 1))
    assert counts.succeeded == 3
    assert sorted(drops) == ([] if fresh else [str(out / f"j{n}") for n in range(3)])
