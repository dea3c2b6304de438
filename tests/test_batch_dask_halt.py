"""``--halt-on-failure`` across a Dask cluster: once a failure is recorded no job of the batch
starts, on any worker (one there then, one restarted or joined since), and the jobs running then
finish with their own lines. Real ``LocalCluster``s; each test releases its waiting jobs (the
file ``go``) only once the worker says it heard of the halt, so nothing rests on timing."""

from __future__ import annotations

import json

import pytest

from conftest import SAFETY_NET, run_cli, start_cli
from streams import check_stream, wait_until
from local_cluster import local_cluster
from processkit.batching.chunk import EARLIER_RUN_LOST

distributed = pytest.importorskip("distributed")


def _wait_for(tmp_path, jobs: list[dict], parallel: int, then=None, left=()) -> tuple[dict[str, dict], bytes]:
    """Runs ``jobs`` (one worker, two threads: their chunks of two) with ``--halt-on-failure``
    and ``--jobs parallel``;
    once the worker's chunks say the batch halted, calls ``then`` with the client and makes
    ``go``. The lines by id, and the batch's stderr. ``left``: jobs a killed run began, whose
    files stay whatever their line says."""
    from processkit.batching import chunk

    out = tmp_path / "out"
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    with local_cluster(n_workers=1, threads_per_worker=2, processes=True) as cluster:
        batch = start_cli(
            "batch", manifest, "--out", out, "--jobs", parallel, "--halt-on-failure",
            "--dask-scheduler", cluster.scheduler_address,
        )  # fmt: skip
        try:
            with distributed.Client(cluster.scheduler_address) as client:
                try:  # what the worker's process holds: asked of it until it says so
                    wait_until(
                        lambda: any(
                            chunk.HALTED in stopped.values() for stopped in client.run(lambda: chunk._stopped).values()
                        ),
                        what="the worker hearing the batch halted",
                    )
                    if then is not None:
                        then(client)
                finally:  # released in any case, so the batch ends and says what it did
                    (tmp_path / "go").touch()
                _, err = batch.communicate(timeout=2 * SAFETY_NET)
        finally:
            batch.kill()
    assert batch.returncode == 117, err
    lines = {line["id"]: line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}
    assert sorted(lines) == sorted(job["id"] for job in jobs)
    for name, line in lines.items():  # each line true to what ran: a halted job has no stream
        if name in left:
            continue
        if line["source"] == "halted":
            assert not (out / name).exists(), name
        else:
            check_stream(out / name / "events.jsonl", line["exit_code"])
    if any(line["source"] == "halted" for line in lines.values()):  # none where every other chunk began first
        assert b"halted by --halt-on-failure" in err, err
    return lines, err


def _waits(tmp_path, name: str) -> dict:
    """A job that waits for ``go``, then leaves ``<name>-ran``."""
    go, ran = tmp_path / "go", tmp_path / f"{name}-ran"
    return {"args": ["sh", "-c", f"until [ -e {go} ]; do sleep 0.01; done; touch {ran}"], "id": name, "timeout": 100}


def _ran(tmp_path, name: str) -> dict:
    """A job that leaves ``<name>-ran`` at once."""
    return {"args": ["touch", str(tmp_path / f"{name}-ran")], "id": name}


def test_a_chunk_running_when_a_dask_batch_halts_starts_no_other_job(tmp_path):
    """The client cancelled every task not back at the first failure: a task that was running
    went on (Dask cannot stop one), its job ended with exit 0 and its stream said so, while its
    line said it never started (``halted``, so ``--resume`` ran it again), and the task's later
    jobs still started on the worker after the client had said the batch halted. ``slow`` runs
    until the worker heard the halt; ``after_slow``, its chunk's next job, must not start."""
    jobs = [
        _waits(tmp_path, "slow"),
        _ran(tmp_path, "after_slow"),
        {"args": ["false"], "id": "bad"},
        *(_ran(tmp_path, f"other{n}") for n in range(5)),
    ]
    jobs[0]["args"][-1] = f"touch {tmp_path / 'slow-began'}; " + jobs[0]["args"][-1]
    jobs[2]["args"] = ["sh", "-c", f"until [ -e {tmp_path / 'slow-began'} ]; do sleep 0.01; done; exit 1"]
    jobs[2]["timeout"] = 100
    lines, _ = _wait_for(tmp_path, jobs, 1)
    assert (lines["slow"]["exit_code"], lines["slow"]["source"]) == (0, "child_exit"), lines["slow"]
    assert (lines["bad"]["exit_code"], lines["bad"]["source"]) == (1, "child_exit"), lines["bad"]
    assert lines["after_slow"]["source"] == "halted" and not (tmp_path / "after_slow-ran").exists()


def test_the_failing_chunk_halts_the_dask_batch_while_its_other_jobs_run(tmp_path):
    """The client halted the batch only once the failing job's whole task came back: while that
    task's other job (``long``) ran, the worker began the next tasks and their jobs ran, unlike on
    one host. The chunk that records the failure halts the batch itself: ``long`` holds its task
    until the worker heard, and the tasks begun then (the third and fourth) start nothing."""
    jobs = [
        {"args": ["false"], "id": "bad"},
        _waits(tmp_path, "long"),
        *(_waits(tmp_path, f"a{n}") for n in range(1, 7)),
    ]
    lines, _ = _wait_for(tmp_path, jobs, 2)
    assert (lines["bad"]["exit_code"], lines["long"]["exit_code"]) == (1, 0), lines
    # one task of a's ran beside the failing one (Dask begins the first two: a1 and a2); the
    # others began once the halt was told, and started nothing
    # (the halt may land between the starts of its two: only the first ran)
    ran = {name for name in (f"a{n}" for n in range(1, 7)) if lines[name]["source"] != "halted"}
    assert ran in (set(), {"a1"}, {"a1", "a2"}, {"a3"}, {"a3", "a4"}, {"a5"}, {"a5", "a6"}), lines
    assert {name for name in (f"a{n}" for n in range(1, 7)) if (tmp_path / f"{name}-ran").exists()} == ran


def test_a_dask_worker_restarted_after_the_halt_starts_none_of_the_batchs_jobs(tmp_path):
    """The halt lived only in the worker processes there when it came: a worker restarted since
    (a nanny's restart, or one joined by scale-up) never heard and ran the tasks it got in full.
    Here the worker is restarted once the client has the failing task back (its line written);
    the other task runs again in the new process, which asks the scheduler, and ``slow`` and
    ``after_slow`` do not run (again)."""
    jobs = [
        _waits(tmp_path, "slow"),
        _ran(tmp_path, "after_slow"),
        {"args": ["false"], "id": "bad"},
        *(_ran(tmp_path, f"other{n}") for n in range(5)),
    ]
    jobs[2]["args"] = ["sh", "-c", f"until [ -e {tmp_path / 'slow-began'} ]; do sleep 0.01; done; exit 1"]
    jobs[0]["args"][-1] = f"touch {tmp_path / 'slow-began'}; " + jobs[0]["args"][-1]

    def restart(client) -> None:
        wait_until(
            lambda: '"id":"bad"' in _text(tmp_path / "out" / "summary.jsonl"), what="bad's line in summary.jsonl"
        )
        client.restart_workers(list(client.scheduler_info()["workers"]))

    lines, err = _wait_for(tmp_path, jobs, 1, then=restart, left=("slow",))
    assert (lines["bad"]["exit_code"], lines["bad"]["source"]) == (1, "child_exit"), lines["bad"]
    # its run again, in the new process, starts nothing; its first run began it, in the process restarted
    assert (lines["slow"]["source"], lines["slow"]["message"]) == ("task_failed", EARLIER_RUN_LOST), lines["slow"]
    assert b"after 1 of its jobs had begun (slow)" in err, err
    assert lines["after_slow"]["source"] == "halted" and not (tmp_path / "after_slow-ran").exists()
    assert run_cli("prune").returncode == 0  # what the restarted worker's batch engine left


def test_a_dask_task_run_again_after_the_halt_reads_back_the_jobs_it_had_ended(tmp_path):
    """A task run again after the batch halted (its worker lost after it told the halt, before
    its result came back) found the halt set and recorded every job ``halted``, the failing one
    too: the batch said no job failed, and ``--resume`` ran it again. ``killer`` holds the
    failing task until the scheduler has the halt and the other tasks are back (a task still
    running when the worker dies runs again too, and a job it was in the middle of is
    ``task_failed``, its earlier run lost), then kills its worker."""
    out = tmp_path / "out"
    kill = tmp_path / "kill"
    jobs = [
        {"args": ["false"], "id": "bad"},
        {
            "args": ["sh", "-c", f"until [ -e {kill} ]; do sleep 0.01; done; kill -9 $PPID"],
            "id": "killer",
            "timeout": 100,
        },
        *(_ran(tmp_path, f"other{n}") for n in range(4)),
    ]

    def then(client) -> None:
        label = json.loads(_text(out / "bad" / "events.jsonl").splitlines()[0])["labels"]["batch"]
        wait_until(
            lambda: distributed.Event(f"processkit-halted-{label}", client).is_set(),
            what="the halt kept on the scheduler",
        )
        wait_until(
            lambda: all(f'"id":"other{n}"' in _text(out / "summary.jsonl") for n in range(4)),
            what="the other tasks' lines in summary.jsonl",
        )
        kill.touch()

    lines, err = _wait_for(tmp_path, jobs, 2, then=then, left=("killer",))
    assert (lines["bad"]["exit_code"], lines["bad"]["source"]) == (1, "child_exit"), lines["bad"]
    # it ran (it killed the worker): recorded "halted", never started, it is now the task's that never came back
    assert (lines["killer"]["source"], lines["killer"]["message"]) == ("task_failed", EARLIER_RUN_LOST), lines["killer"]
    assert b"after 2 of its jobs had begun (bad, killer)" in err, err
    assert run_cli("prune").returncode == 0  # what the killed worker's batch engine left


def _text(path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""
