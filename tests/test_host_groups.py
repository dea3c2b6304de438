"""The host as a supervisor of run groups (issue 45): a run whose set-up or step raises ends as
itself and every other run goes on; a group's own stop ends only its runs; only the host's own
failure (a KeyboardInterrupt in a step) ends every group."""

from __future__ import annotations

import errno

import pytest

from processkit.engine.endings import Outcome, internal
from processkit.engine.host import Host, RunGroup
from processkit.engine.runner import steps
from processkit.engine.waits import wait_until
from processkit.spec import RunSpec


def _spec(tmp_path, name: str, argv: tuple[str, ...]) -> RunSpec:
    return RunSpec(argv=argv, jsonl=str(tmp_path / f"{name}.jsonl"), run_id=name, run_id_given=True, echo=False)


def _failing_setup():
    """A carrier's set-up that raises before the run's first step (the service's memfds, say)."""
    raise OSError(errno.EMFILE, "Too many open files")
    yield  # a generator of waits, as every run is


def test_a_run_whose_set_up_raises_ends_alone_beside_20_healthy_runs(tmp_path):
    host = Host(watch=False)
    runs = [steps(host, _spec(tmp_path, f"ok{n}", ("sh", "-c", "exit 0"))) for n in range(10)]
    runs.append(_failing_setup())
    runs += [steps(host, _spec(tmp_path, f"ok{n}", ("sh", "-c", "exit 0"))) for n in range(10, 20)]
    pending = list(reversed(runs))
    results: list = []
    failed = lambda exc, steps: internal(f"{type(exc).__name__}: {exc}")  # noqa: E731
    try:
        host.supervise([RunGroup(lambda: pending.pop() if pending else None, results.append, 21, failed=failed)])
    finally:
        host.close()
    assert len(results) == 21
    assert all(isinstance(result, Outcome) for result in results)
    failed = [result for result in results if result.code != 0]
    assert len(failed) == 1 and failed[0].code == 104, [r.code for r in results]
    assert "Too many open files" in failed[0].failure.message
    for n in range(20):
        events = (tmp_path / f"ok{n}.jsonl").read_text()
        assert '"cancelled"' not in events and '"child_exit"' in events


def test_a_groups_stop_ends_its_runs_and_no_other_groups(tmp_path):
    host = Host(watch=False)
    ended: dict[str, list] = {"a": [], "b": [], "stopper": []}

    def group(name: str, runs: list) -> RunGroup:
        return RunGroup(lambda: runs.pop() if runs else None, ended[name].append, len(runs))

    a = group("a", [steps(host, _spec(tmp_path, f"a{n}", ("sleep", "30"))) for n in range(3)])
    b = group("b", [steps(host, _spec(tmp_path, f"b{n}", ("sleep", "0.5"))) for n in range(3)])

    def stopper():  # a third group's run: stops group a once all six children live
        # polled: a run's root_pid is set once its exec is reported, which wakes only that run
        yield from wait_until(lambda: len(host.runs) == 6 and all(run.root_pid for run in host.runs), poll=0.01)
        a.stop("sigterm")
        return "stopped a"

    try:
        host.supervise([a, b, group("stopper", [stopper()])])
    finally:
        host.close()
    assert [outcome.code for outcome in ended["a"]] == [107, 107, 107]
    assert [outcome.code for outcome in ended["b"]] == [0, 0, 0]
    assert ended["stopper"] == ["stopped a"]


def test_a_keyboard_interrupt_in_a_step_is_the_hosts_own_failure(tmp_path):
    host = Host(watch=False)
    pending = [steps(host, _spec(tmp_path, "long", ("sleep", "30")))]

    def interrupts():
        yield from wait_until(lambda: bool(host.runs) and all(run.root_pid for run in host.runs), poll=0.01)
        raise KeyboardInterrupt

    pending.insert(0, interrupts())
    results: list = []
    with pytest.raises(KeyboardInterrupt):
        try:
            group = RunGroup(lambda: pending.pop() if pending else None, results.append, 2, failed=lambda e, s: None)
            host.supervise([group])
        finally:
            host.close()
    assert [outcome.code for outcome in results] == [107]
