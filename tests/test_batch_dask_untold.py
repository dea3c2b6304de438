"""Workers a ``--dask-scheduler`` batch's halt or stop does not reach (a stopped process: SIGSTOP):
the telling is bounded wherever it is told from, and the workers it missed are named in one line
(and on the lines of the jobs whose task did not come back). Real ``LocalCluster``s; what the
workers and the client say is read from the test's own stderr, which both inherit."""

from __future__ import annotations

import json
import os
import signal

import pytest

from conftest import SAFETY_NET, pid_alive, start_cli
from local_cluster import held_job, job_pids, local_cluster, run_on_dask_beside, stop_this_client
from streams import wait_until

distributed = pytest.importorskip("distributed")


def _said(capfd, seen: list[str], words: str) -> list[str]:
    """The lines of stderr so far (kept in ``seen``) that hold ``words``."""
    seen.extend(capfd.readouterr().err.splitlines())
    return [line for line in seen if words in line]


def test_a_halt_told_from_a_chunk_is_bounded_and_names_the_worker_it_missed(tmp_path, capfd):
    """The chunk that records the first failure tells every worker the batch halted, from its
    worker's event loop; a worker that could not answer (stopped) held that telling for as long as
    it stayed stopped, and nothing was said. Bounded as the client's telling is (here 1 s), one
    line in the failing worker's log names the stopped one."""
    began, go = tmp_path / "began", tmp_path / "go"
    began.mkdir()
    bad = held_job(began, "bad", f"until [ -e {go} ]; do sleep 0.01; done; exit 1")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps(bad) + "\n")

    def short_bound() -> None:
        from processkit.batching import chunk

        chunk.HALT_TOLD_S = 1

    with local_cluster(n_workers=2, threads_per_worker=1, processes=True) as cluster:
        with distributed.Client(cluster.scheduler_address) as client:
            client.run(short_bound)
            workers = client.run(os.getpid)
        batch = start_cli(
            "batch", manifest, "--out", tmp_path / "out", "--halt-on-failure",
            "--dask-scheduler", cluster.scheduler_address, cwd=tmp_path,
        )  # fmt: skip
        try:
            failing = job_pids(began, "bad")[0]
            address, pid = next((address, pid) for address, pid in workers.items() if pid != failing)
            seen: list[str] = []
            os.kill(pid, signal.SIGSTOP)
            try:
                go.touch()
                said = wait_until(
                    lambda: _said(capfd, seen, "did not answer the halt told from here"), what="the untold worker named"
                )
            finally:
                os.kill(pid, signal.SIGCONT)
            _, err = batch.communicate(timeout=SAFETY_NET)
        finally:
            batch.kill()
    assert batch.returncode == 117, err
    assert said == [
        f"processkit-cli: warning: 1 Dask worker did not answer the halt told from here within 1 s: {address}"
    ]


def _stop_missing_a_worker(tmp_path, monkeypatch, jobs: list[dict], stopped_id: str, *, wait_s, resumed, ended):
    """``jobs`` (two, ``held_job``s into ``began``) on two one-thread workers, the client in this
    process (``WIND_DOWN_S`` ``wait_s``); once both began, the worker of ``stopped_id`` stopped
    (SIGSTOP) and the client sent SIGTERM. That worker goes on after the first telling of the stop
    when ``resumed``, else once the client is done; ``ended()`` before the cluster closes. The
    lines by id, the counts, the workers each telling missed and the stopped worker's address."""
    from processkit.batching import fleet
    from processkit.batching.manifest import jobs_from
    from processkit.batching.on_host import Settings

    began = tmp_path / "began"
    tellings: list[list[str]] = []
    stopped: list[int] = []
    tell_stopped = fleet.tell_stopped

    def counted(client, label, source, within_s, *heard):
        tellings.append(tell_stopped(client, label, source, within_s, *heard))
        if resumed and len(tellings) == 1:
            os.kill(stopped[0], signal.SIGCONT)  # it answers the next telling
        return tellings[-1]

    monkeypatch.setattr(fleet, "tell_stopped", counted)
    monkeypatch.setattr(fleet, "WIND_DOWN_S", wait_s)

    def stop_once_both_began() -> None:
        stopped.append(job_pids(began, stopped_id)[0])
        for job in jobs:
            job_pids(began, job["id"])
        os.kill(stopped[0], signal.SIGSTOP)
        stop_this_client()

    with local_cluster(n_workers=2, threads_per_worker=1, processes=True) as cluster:
        with distributed.Client(cluster.scheduler_address) as client:
            workers = {pid: address for address, pid in client.run(os.getpid).items()}
        try:
            settings = Settings(str(tmp_path / "out"), 2)
            lines, counts = run_on_dask_beside(
                stop_once_both_began, cluster.scheduler_address, jobs_from(jobs), settings
            )
        finally:
            if stopped:
                os.kill(stopped[0], signal.SIGCONT)
            ended()
    return {line.id: line for line in lines}, counts, tellings, workers[stopped[0]]


def test_a_stop_that_misses_a_worker_names_it_once_and_records_it(tmp_path, monkeypatch, capfd):
    """A stop told each second while one of two workers cannot answer (stopped): the missed worker
    was passed over without a word, and the job of its task, which never came back, was recorded
    cancelled and never started, though it ran (and may run on: the stop never reached it). Now
    one line names the worker, however many tellings miss it; the job is ``task_failed``, its
    line saying its task did not come back and naming the worker."""
    began = tmp_path / "began"
    began.mkdir()

    def b_ended() -> None:
        job = job_pids(began, "b")[1]
        wait_until(lambda: not pid_alive(job), what="b's job ending once its worker goes on")

    by_id, counts, tellings, address = _stop_missing_a_worker(
        tmp_path, monkeypatch, [held_job(began, "a"), held_job(began, "b")], "b",
        wait_s=3, resumed=False, ended=b_ended,
    )  # fmt: skip
    assert counts.cancelled_by == "sigterm"
    assert (by_id["a"].exit_code, by_id["a"].source) == (107, "cancelled"), by_id["a"]
    assert (by_id["b"].source, by_id["b"].message) == (  # it ran: never "not started"
        "task_failed",
        f"its Dask task did not come back (the stop did not reach 1 Dask worker: {address})",
    )
    assert len(tellings) >= 2 and all(untold == [address] for untold in tellings), tellings
    said = _said(capfd, [], "did not answer the stop")
    assert said == [f"processkit-cli: warning: 1 Dask worker did not answer the stop within 1 s: {address}"], said


def test_a_worker_the_stop_reached_later_is_not_named_on_a_task_still_out(tmp_path, monkeypatch, capfd):
    """A worker that cannot answer the stop's first telling (stopped), then answers the next, and
    a job on the other worker that ignores the stop (its grace long): its task is still out when
    the wait ends. Its line named the first worker ("the stop did not reach ..."), which the stop
    had reached; the workers named are those that missed the latest telling or never answered."""
    from processkit.batching import fleet

    began = tmp_path / "began"
    began.mkdir()
    deaf = held_job(began, "deaf", "trap '' INT TERM HUP; exec sleep 60.0737")
    deaf["grace"] = "60s"
    monkeypatch.setattr(fleet, "_grace_s", lambda todo: 0)  # deaf's task out: the wait ends

    def deaf_ended() -> None:
        job = job_pids(began, "deaf")[1]
        os.kill(job, signal.SIGKILL)
        wait_until(lambda: not pid_alive(job), what="deaf's job ending")

    by_id, _, tellings, address = _stop_missing_a_worker(
        tmp_path, monkeypatch, [held_job(began, "a"), deaf], "a", wait_s=4, resumed=True, ended=deaf_ended
    )
    assert tellings[0] == [address] and tellings[-1] == [], tellings
    assert (by_id["a"].exit_code, by_id["a"].source) == (107, "cancelled"), by_id["a"]
    assert (by_id["deaf"].source, by_id["deaf"].message) == ("task_failed", "its Dask task did not come back")
    said = _said(capfd, [], "did not answer the stop")
    assert said == [f"processkit-cli: warning: 1 Dask worker did not answer the stop within 1 s: {address}"], said
