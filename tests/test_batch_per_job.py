"""What a batch job repeats that it need not (issue 49, batch52), counted from outside: the
reads of a lent v2 group's controllers."""

from __future__ import annotations

import os

import pytest

from streams import check_stream, one


def test_a_lent_v2_groups_controllers_are_read_once_a_lend():
    """Whether a v2 group's controllers let it be kept idle is read once when it is made; given
    back, only its link count is looked at, and its controllers are read again when it is lent
    (``lent.restarted``): one read a lend, not one more at each give."""
    from processkit import rundir
    from processkit.containment import cgroup_v2, cgroupfs, pool

    parent = cgroup_v2.find_parent()
    if parent is None or os.geteuid() != 0:
        pytest.skip("no cgroup v2 parent group here")
    reads: list[str] = []
    real_content = cgroupfs.HeldFiles.content
    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home)
    rounds = 4
    try:
        cgroupfs.HeldFiles.content = lambda files, name: reads.append(name) or real_content(files, name)  # type: ignore[method-assign]
        groups = []
        for _ in range(rounds):
            group = lender.take(parent, pool.V2)
            groups.append(group)
            lender.give(group)
        assert all(group is groups[0] for group in groups), "the one idle group is lent again"
        assert reads.count("cgroup.controllers") <= rounds, reads
    finally:
        cgroupfs.HeldFiles.content = real_content  # type: ignore[method-assign]
        lender.close()
        home.close()


def test_held_memfds_are_lent_to_each_run_not_copied_and_each_kept_file_is_its_jobs(tmp_path, monkeypatch):
    """``--keep failed`` lends a job's three memfds to its run as they are
    (``RunContext.held_lent``): no copy is made for the engine and closed by it at each job
    (three ``dup`` and three ``close`` a job); each memfd is closed once, with the batch. A
    failed job's files after a passing one's run still hold its own bytes alone."""
    from processkit.batching.manifest import jobs_from
    from processkit.batching.on_host import Settings, run_batch

    made: list[int] = []
    copied: list[int] = []
    closed: list[int] = []
    real_create, real_dup, real_close = os.memfd_create, os.dup, os.close

    def create(name, flags=0):
        fd = real_create(name, flags)
        made.append(fd)
        return fd

    def dup(fd):
        if fd in made:
            copied.append(fd)
        return real_dup(fd)

    def close(fd):
        if fd in made:
            closed.append(fd)
        return real_close(fd)

    monkeypatch.setattr(os, "memfd_create", create)
    monkeypatch.setattr(os, "dup", dup)
    monkeypatch.setattr(os, "close", close)
    jobs = [
        {"args": ["sh", "-c", "echo passing; echo note >&2"], "id": "ok"},
        {"args": ["sh", "-c", "echo out; echo err >&2; exit 4"], "id": "bad"},
        {"args": ["true"], "id": "quiet"},
        {"args": ["sh", "-c", "printf y; exit 5"], "id": "last"},
    ]
    out = tmp_path / "out"
    lines, _ = run_batch(jobs_from(jobs), Settings(str(out), 1, keep_failed_only=True), signals=False)
    assert [line.exit_code for line in lines] == [0, 4, 0, 5]
    assert len(made) == 3, "one set of memfds for the one job in flight"
    assert copied == [], "no copy of a held memfd is made for a run"
    assert sorted(closed) == sorted(made), "each memfd closed once, with the batch"
    for line, data in (("bad", (b"out\n", b"err\n")), ("last", (b"y", b""))):
        events = check_stream(out / line / "events.jsonl", 4 if line == "bad" else 5)
        assert one(events, "run_started")["run_id"] == next(x.run_id for x in lines if x.id == line)
        for name, kept in zip(("stdout", "stderr"), data):
            assert (out / line / "capture" / f"{name}.log").read_bytes() == kept
    assert not (out / "ok").exists() and not (out / "quiet").exists()


def test_the_batchs_working_directory_is_read_once_and_each_run_reports_it(tmp_path, monkeypatch):
    """A batch reads its working directory once for all its runs (``RunContext.cwd``), not a
    ``getcwd`` a job; each run still reports it (``run_started``'s ``cwd``), and a job's own
    relative ``cwd`` is taken from it."""
    from processkit.batching.manifest import jobs_from
    from processkit.batching.on_host import Settings, run_batch

    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    reads: list[str] = []
    real = os.getcwd
    monkeypatch.setattr(os, "getcwd", lambda: reads.append("getcwd") or real())
    jobs = [{"args": ["sh", "-c", "exit 3"], "id": f"j{n}"} for n in range(4)]
    jobs.append({"args": ["sh", "-c", 'pwd > "$0"; exit 3', str(tmp_path / "where")], "id": "sub", "cwd": "sub"})
    out = tmp_path / "out"
    lines, _ = run_batch(jobs_from(jobs), Settings(str(out), 1, keep_failed_only=True), signals=False)
    assert [line.exit_code for line in lines] == [3] * 5
    assert len(reads) <= 2, reads  # the batch's one read (and the manifest's), not one a job
    for line in lines:
        started = one(check_stream(out / line.id / "events.jsonl", 3), "run_started")
        assert started["cwd"] == (str(tmp_path / "sub") if line.id == "sub" else str(tmp_path))
    assert (tmp_path / "where").read_text().strip() == str(tmp_path / "sub")


def test_a_passing_held_jobs_dropped_events_are_given_no_text_time(tmp_path, monkeypatch):
    """A ``--keep failed`` job's stream gathers the events its line does not read with the clock
    read at their emission, formatted only if the stream is kept: a passing job's dropped
    events are never given a text time (five a job were), and a failed job's stream has every
    time, in order, as a stream written as it goes has."""
    from processkit.batching.manifest import jobs_from
    from processkit.batching.on_host import Settings, run_batch
    from processkit.events import base, emitter

    base._stamp()  # an event's own stamper taken now: the count below is the emitter's alone
    formatted: list[int | None] = []
    real = emitter.utc_timestamp
    monkeypatch.setattr(emitter, "utc_timestamp", lambda ns=None, digits=3: formatted.append(ns) or real(ns, digits))
    passing = 6
    jobs = [{"args": ["true"], "id": f"ok{n}"} for n in range(passing)]
    out = tmp_path / "out"
    lines, _ = run_batch(jobs_from(jobs), Settings(str(out), 1, keep_failed_only=True), signals=False)
    assert [line.exit_code for line in lines] == [0] * passing
    assert len(formatted) <= passing, f"{len(formatted)} times formatted for {passing} passing jobs"
    formatted.clear()
    jobs = [{"args": ["sh", "-c", "exit 6"], "id": "bad"}]
    lines, _ = run_batch(jobs_from(jobs), Settings(str(tmp_path / "out2"), 1, keep_failed_only=True), signals=False)
    events = check_stream(tmp_path / "out2" / "bad" / "events.jsonl", 6)
    times = [event["time"] for event in events]
    assert times == sorted(times) and all(time.endswith("Z") for time in times)
    assert formatted, "the kept stream's gathered events are given their times"


def test_a_batch_names_its_jobs_runs_without_a_getpid_each_and_a_forked_child_its_own(tmp_path, monkeypatch):
    """A job's run id (``run-<pid>-<nanos>``) takes the pid read once a process, not a
    ``getpid`` a job; a forked child reads its own again, so its ids name it."""
    from processkit.batching.manifest import jobs_from
    from processkit.batching.on_host import Settings, run_batch
    from processkit.spec import new_run_id

    asked: list[int] = []
    real = os.getpid
    monkeypatch.setattr(os, "getpid", lambda: asked.append(1) or real())
    counts = []
    for count in (2, 8):  # the batch's own reads (its label, its directory) and none a job
        asked.clear()
        jobs = [{"args": ["true"], "id": f"ok{n}"} for n in range(count)]
        out = tmp_path / f"out{count}"
        lines, _ = run_batch(jobs_from(jobs), Settings(str(out), 1, keep_failed_only=True), signals=False)
        assert {line.run_id.split("-")[1] for line in lines} == {str(real())}
        counts.append(len(asked))
    assert counts[1] <= counts[0], f"getpid calls: {counts[0]} for 2 jobs, {counts[1]} for 8"
    monkeypatch.setattr(os, "getpid", real)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the forked child
        os.write(write, new_run_id().encode() + b" " + str(os.getpid()).encode())
        os._exit(0)
    os.close(write)
    said = os.read(read, 200).decode().split()
    os.close(read)
    os.waitpid(child, 0)
    assert said[0].split("-")[1] == said[1] != str(real())


def test_a_jobs_signal_is_its_outcomes_and_a_passing_held_jobs_root_exited_is_never_a_record(tmp_path, monkeypatch):
    """A job's line takes the signal its root died of from the run's Outcome, not from its
    ``root_exited`` read back: a passing ``--keep failed`` job's ``root_exited`` is gathered as
    the event and dropped, never made a record; a root killed by a signal still has it on its
    line (and in its kept stream), a root that exits 137 by itself has none."""
    from processkit.batching.manifest import jobs_from
    from processkit.batching.on_host import Settings, run_batch
    from processkit.events import base

    made: list[str] = []
    real = base.Event.to_json
    monkeypatch.setattr(base.Event, "to_json", lambda self, stamp=None: made.append(self.name) or real(self, stamp))
    jobs = [{"args": ["true"], "id": f"ok{n}"} for n in range(3)]
    lines, _ = run_batch(jobs_from(jobs), Settings(str(tmp_path / "out"), 1, keep_failed_only=True), signals=False)
    assert [line.exit_code for line in lines] == [0, 0, 0]
    assert "root_exited" not in made, made
    jobs = [
        {"args": ["sh", "-c", "kill -9 $$"], "id": "killed"},
        {"args": ["sh", "-c", "exit 137"], "id": "exits"},
    ]
    out = tmp_path / "out2"
    lines, _ = run_batch(jobs_from(jobs), Settings(str(out), 1, keep_failed_only=True), signals=False)
    by_id = {line.id: line for line in lines}
    assert (by_id["killed"].exit_code, by_id["killed"].signal) == (137, 9)
    assert (by_id["exits"].exit_code, by_id["exits"].signal) == (137, None)
    death = one(check_stream(out / "killed" / "events.jsonl", 137), "root_exited")
    assert (death["outcome"], death["signal"]) == ("signalled", 9)
