"""What the engine does per run that it need not (issue 49, bench/README.md "The engine's per-run
CPU"): each test pins one cut, so a change that puts the work back fails here, while the events
and figures stay those the contract's suites check."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from processkit.batching.manifest import jobs_from
from processkit.batching.on_host import Settings, run_batch


def test_a_hosts_runs_choose_their_pump_and_spawn_once(tmp_path, monkeypatch):
    """The backends follow the process's environment and build, the same for every run a host
    carries: its first run chooses them, the batch's other jobs do not ask again."""
    from processkit.engine import pump, spawn

    asked: list[str] = []
    for module in (pump, spawn):
        real = module.select_backend
        monkeypatch.setattr(
            module, "select_backend", lambda real=real, name=module.__name__: asked.append(name) or real()
        )
    jobs = jobs_from([{"args": ["true"], "id": f"j{n}"} for n in range(3)])
    lines, _ = run_batch(jobs, Settings(str(tmp_path / "out"), jobs=2), signals=False)
    assert [line.exit_code for line in lines] == [0, 0, 0]
    assert sorted(asked) == ["processkit.engine.pump", "processkit.engine.spawn"]


def _v2_parent() -> str | None:
    from processkit.containment import cgroup_v2

    parent = cgroup_v2.find_parent()
    return parent if parent is not None and os.access(parent, os.W_OK) else None


def test_an_empty_v2_groups_members_are_one_read_and_a_full_ones_are_found(monkeypatch):
    """A run's tree at its end is most often gone: ``populated 0`` in its group's
    ``cgroup.events`` says so in one read (not the member list, the link count and then that
    file). A process in the group, or in a group below it, is still found."""
    from processkit import rundir
    from processkit.containment import cgroup_v2, cgroupfs, pool

    parent = _v2_parent()
    if parent is None:
        pytest.skip("no writable cgroup v2 parent group here")
    reads: list[str] = []
    real = cgroupfs.HeldFiles.content
    monkeypatch.setattr(cgroupfs.HeldFiles, "content", lambda files, name: reads.append(name) or real(files, name))
    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home)
    group = cgroup_v2.CgroupV2(parent, "unused", lender)
    sleeper = None
    try:
        reads.clear()
        assert group.member_pids() == []
        assert reads == ["cgroup.events"]
        sleeper = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
        below = os.path.join(group.path, "below")
        os.mkdir(below)
        cgroupfs.write_text(os.path.join(below, "cgroup.procs"), str(sleeper.pid))
        assert group.member_pids() == [sleeper.pid], "a member of a group below it"
    finally:
        if sleeper is not None:
            sleeper.kill()
            sleeper.wait()
        group.release()
        lender.close()
        home.close()


def test_a_setting_reads_as_os_environ_gets_it_live(monkeypatch):
    """``envvars.get`` answers as ``os.environ.get``: a value set or removed since shows at
    once, an undecodable byte as the same surrogate, a name not set as None."""
    from processkit import envvars

    name = "PROCESSKIT_ENGINE51_SETTING"
    monkeypatch.delenv(name, raising=False)
    assert envvars.get(name) is None is os.environ.get(name)
    for value in ("0", "process_group", "caf\udce9"):
        monkeypatch.setenv(name, value)
        assert envvars.get(name) == value == os.environ.get(name)
    monkeypatch.delenv(name)
    assert envvars.get(name) is None


def test_a_run_reads_no_setting_through_os_environ_get_in_its_containment(tmp_path, monkeypatch):
    """The containment's settings (accounting, the mechanism, the v1 root) are read several
    times a run; none through ``os.environ.get``, whose answer for a name not set costs a raised
    and caught KeyError each time."""
    from processkit.engine.runner import execute
    from processkit.spec import RunSpec

    asked: list[str] = []
    real = type(os.environ).get

    def get(mapping, key, default=None):
        asked.append(key)
        return real(mapping, key, default)

    spec = RunSpec(argv=["true"], jsonl=str(tmp_path / "events.jsonl"), run_id="r", run_id_given=True, echo=False)
    monkeypatch.setattr(type(os.environ), "get", get)
    outcome = execute(spec)
    monkeypatch.setattr(type(os.environ), "get", real)
    assert outcome.code == 0
    assert not {"PROCESSKIT_ACCOUNTING", "PROCESSKIT_CONTAINMENT", "PROCESSKIT_CGROUP_V1_ROOT"} & set(asked)


def test_a_run_whose_stream_is_dropped_builds_no_event_of_its_start_or_its_end(tmp_path, monkeypatch):
    """A stream to ``/dev/null`` that keeps nothing (each of ``bench``'s runs) drops its events
    unformatted; its ``run_started``, snapshot, ending (``root_exited``), figures, cleanup pair
    and ``runner_exit`` are not built for it either: nothing could read one."""
    from processkit.engine.runner import execute
    from processkit.events import base
    from processkit.spec import RunSpec

    built: list[str] = []
    real = base.Event.__init__

    def counted(event, *args, **values):
        built.append(event.name)
        real(event, *args, **values)

    monkeypatch.setattr(base.Event, "__init__", counted)
    spec = RunSpec(argv=["true"], jsonl=os.devnull, run_id="r", run_id_given=True, echo=False)
    assert execute(spec).code == 0
    assert built == []


def test_a_passing_keep_failed_jobs_gathered_events_are_never_made_records(tmp_path, monkeypatch):
    """A ``--keep failed`` job's stream gathers the events its line does not read as themselves,
    and a passing job's are dropped: none is made a record (``to_json`` with its emit stamp, as
    only the gathered are), unless the carrier asked for the records (the runner service)."""
    from processkit.events import base

    made: list[str] = []
    real = base.Event.to_json

    def counted(event, *args, **keywords):
        if args or keywords:  # a gathered event made a record with the stamp of its emit
            made.append(event.name)
        return real(event, *args, **keywords)

    monkeypatch.setattr(base.Event, "to_json", counted)
    jobs = jobs_from([{"args": ["true"], "id": f"j{n}"} for n in range(3)])
    lines, _ = run_batch(jobs, Settings(str(tmp_path / "out"), jobs=2, keep_failed_only=True), signals=False)
    assert [line.exit_code for line in lines] == [0, 0, 0]
    assert made == []


def test_a_lingering_runs_exited_root_is_collected_with_no_loop_turn(tmp_path, monkeypatch):
    """A run whose spawn lingers for its child's exit (``RunContext.linger_ms``: each of
    ``bench``'s runs) most often finds the root exited when its race begins: it is collected at
    once, its pidfd never put in the loop (no registration, removal or loop turn to hear of it).
    The linger here is long, so the spawn surely returns only once ``true`` has exited; the
    exit's code and the run's end are as ever."""
    from processkit.engine import runner, spawn
    from processkit.engine.host import Host
    from processkit.loop import Loop
    from processkit.context import RunContext
    from processkit.spec import RunSpec

    if spawn.select_backend() != "native":
        pytest.skip("the native spawn lingers; the fallback's child is collected at once anyway")
    added: list[int] = []
    real = Loop.add_reader
    monkeypatch.setattr(Loop, "add_reader", lambda loop, fd, callback: added.append(fd) or real(loop, fd, callback))
    spec = RunSpec(argv=["sh", "-c", "exit 3"], jsonl=str(tmp_path / "events.jsonl"), run_id="r", run_id_given=True)
    null = os.open(os.devnull, os.O_WRONLY)
    host = Host(watch=False)
    try:
        outcome = host.carry(
            runner.steps(host, spec, context=RunContext(output_fd=null, linger_ms=600_000, publish_after_ms=600_000))
        )
    finally:
        host.close()
        os.close(null)
    assert outcome.code == 3
    assert added == [], "nothing put in the loop: the exited root was collected at once"
    events = [line.split('"event":"')[1].split('"')[0] for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert events[events.index("root_exited") - 1 :][:2] == ["members_snapshot", "root_exited"]
    assert events[-1] == "runner_exit"


def test_a_lodged_hosts_accounting_only_container_repeats_no_once_a_process_work(monkeypatch):
    """A lodged host's run without a cap (every API call's, most batch jobs'), after its first:
    accounting is asked once, the v2 parent's path is not normalised again and the sweep's
    module is not looked up; its groups are still taken from the pool, as many as the first
    run's (their looks stay at the take)."""
    from processkit import rundir
    from processkit.containment import accounting, create, pool
    from processkit.spec import NO_LIMITS

    home = rundir.RunDir()
    home.holds_jobs = True
    asked: list[str] = []
    real_normpath, real_enabled, real_take = os.path.normpath, accounting.enabled, pool.Pool.take
    takes = [0, 0]
    try:
        for seq in range(2):
            if seq == 1:  # the second run's, once the first made what is made once
                monkeypatch.setattr(os.path, "normpath", lambda path: asked.append("normpath") or real_normpath(path))
                monkeypatch.setattr(accounting, "enabled", lambda: asked.append("enabled") or real_enabled())
                monkeypatch.delitem(sys.modules, "processkit.containment.sweep", raising=False)

            def take(self, parent, controllers, seq=seq):
                takes[seq] += 1
                return real_take(self, parent, controllers)

            monkeypatch.setattr(pool.Pool, "take", take)
            slot = rundir.JobSlot(home, seq)
            container = create(NO_LIMITS, slot)
            container.release()
            slot.close()
        assert asked == ["enabled"]
        assert "processkit.containment.sweep" not in sys.modules, "the sweep was looked up again"
        assert takes[1] == takes[0] > 0, takes
    finally:
        lender = pool.held_by(home)
        if lender is not None:
            lender.close()
        home.close()


def test_only_a_batch_pays_for_the_count_of_what_a_root_left_running(tmp_path, monkeypatch):
    """A root that exits leaving a process running: the count of those still alive (a
    ``/proc/<pid>/status`` read each, ``members.dying``) is batch's LEAK alone; ``run``'s engine
    (``bench``'s and the API's too) reads nothing for it, and a batch's job still counts it."""
    from processkit.engine import runner
    from processkit.engine.runner import execute
    from processkit.spec import RunSpec

    asked: list[int] = []
    real = runner.dying
    monkeypatch.setattr(runner, "dying", lambda pid: asked.append(pid) or real(pid))
    leaves = ["sh", "-c", "sleep 300 >/dev/null 2>&1 & exit 0"]  # holding none of its pipes
    spec = RunSpec(argv=leaves, jsonl=str(tmp_path / "events.jsonl"), run_id="r", run_id_given=True, echo=False)
    outcome = execute(spec)
    assert (outcome.code, outcome.left_behind, asked) == (0, 0, [])
    lines, _ = run_batch(jobs_from([{"args": leaves, "id": "leaky"}]), Settings(str(tmp_path / "out")), signals=False)
    assert [(line.exit_code, line.leaked) for line in lines] == [(0, 1)]
    assert len(asked) == 1
