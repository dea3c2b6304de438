"""The host as a scheduler: a run is resumed once something woke it (its loop callbacks, its
root's exit routed from another run's step, a stop signal), the loop never blocks while a woken
run waits to be resumed, and a step that raises ends every run and then propagates."""

from __future__ import annotations

import datetime
import json
import os
import sys
import threading
import time

import pytest

from processkit.batching.on_host import Settings, run_batch
from processkit.batching.manifest import jobs_from
from processkit.engine.host import Host
from processkit.engine.waits import Wait, wait_until

from conftest import SAFETY_NET
from fifo_ends import opened_for_writing, writer_of
from manual_clock import ManualClock
from streams import wait_until as waited_for


class NeverBlocks:
    """``host.loop.run_once`` that fails the test instead of blocking, once ``armed``."""

    def __init__(self, host: Host):
        self.armed = False
        self._run_once = host.loop.run_once
        host.loop.run_once = self  # type: ignore[method-assign]

    def __call__(self, max_wait=None):
        if self.armed and (max_wait is None or max_wait > 0):
            raise AssertionError(f"the loop blocked ({max_wait}) while a woken run waited")
        self._run_once(max_wait)


def carry(host: Host, runs: list, capacity: int) -> list:
    results: list = []
    pending = list(reversed(runs))
    try:
        host.carry_all(lambda: pending.pop() if pending else None, results.append, capacity)
    finally:
        host.close()
    return results


def test_a_run_whose_event_came_is_resumed_before_a_fresh_run_starts():
    host = Host(watch=False)
    order: list[str] = []
    read_end, write_end = os.pipe()
    woken = []

    def waiter():
        host.run_loop().add_reader(read_end, lambda: woken.append(os.read(read_end, 1)))
        yield from wait_until(lambda: bool(woken))
        host.loop.remove_reader(read_end)
        order.append("waiter resumed")

    def quick():
        os.write(write_end, b"x")  # the event the waiter waits for comes while this run works
        order.append("quick ran")
        yield from ()

    def fresh():
        order.append("fresh started")
        yield from ()

    try:
        carry(host, [waiter(), quick(), fresh()], capacity=2)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert order == ["quick ran", "waiter resumed", "fresh started"]


def test_a_step_that_satisfies_another_runs_wait_resumes_it_before_the_loop_blocks():
    """As the reaper does when a fresh run's step collects an older run's root: nothing on the
    loop announces it, and with no timer at all the old host slept for ever."""
    host = Host(watch=False)
    guard = NeverBlocks(host)
    routed: list = []
    satisfied: list[int] = []
    order: list[str] = []

    def waiter():
        routed.append(host.run_loop().waking(lambda: satisfied.append(1)))  # as race gives the reaper
        yield from wait_until(lambda: bool(satisfied))
        order.append("waiter resumed")

    def satisfier():
        yield Wait(lambda: True)  # a turn of its own first: the waiter is waiting by then
        guard.armed = True
        routed[0]()
        order.append("satisfier done")

    carry(host, [waiter(), satisfier()], capacity=2)
    assert order == ["satisfier done", "waiter resumed"]


def test_a_wait_that_already_holds_gives_up_the_loop_for_one_turn_only():
    host = Host(watch=False)
    guard = NeverBlocks(host)
    guard.armed = True
    turns: list[int] = []

    def chunked():
        for n in range(5):
            turns.append(n)
            yield Wait(lambda: True)

    assert carry(host, [chunked()], capacity=1) == [None]
    assert turns == [0, 1, 2, 3, 4]


def test_a_turn_asks_only_the_runs_that_woke():
    """Fifty runs wait on conditions nothing announces yet while one run works in chunks: no
    chunk's turn asks their ``done()`` (the old host asked every wait on every turn)."""
    host = Host(watch=False)
    asked = [0]
    flag: list[int] = []
    wakers: list = []

    def idle():
        wakers.append(host.run_loop().waking(lambda: None))

        def done():
            asked[0] += 1
            return bool(flag)

        yield from wait_until(done)

    def worker():
        yield Wait(lambda: True)
        before = asked[0]
        for _ in range(20):
            yield Wait(lambda: True)
        during = asked[0] - before
        flag.append(1)
        for wake in wakers:
            wake()
        return during

    results = carry(host, [idle() for _ in range(50)] + [worker()], capacity=51)
    assert results[0] == 0, f"{results[0]} asks of waits nothing woke"
    assert asked[0] == 150  # each idle run: before its yield, when woken, and for wait_until to return


class Jumping:
    """``host.loop`` on a clock of the test's own that jumps, when the loop would block, to the
    end of that wait (as trio's autojump clock does): the polls and the deadline then fall as the
    host schedules them, not as a loaded machine gets round to running this process (a 250 ms
    stall took every poll out of a 300 ms wait)."""

    def __init__(self, host: Host):
        self.clock = ManualClock()
        self.loop = host.loop
        self.loop._time = self.clock
        self.loop.clock()
        self._run_once = self.loop.run_once
        self.loop.run_once = self  # type: ignore[method-assign]
        self.turns = 0

    def __call__(self, max_wait=None):
        self.turns += 1
        assert self.turns < 10_000, "the loop turned without ever waiting (its clock cannot move on)"
        delay = self.loop._next_timer_delay()
        if max_wait is not None:
            delay = max_wait if delay is None else min(delay, max_wait)
        assert delay is not None, "the loop would block with no timer: nothing would ever wake it"
        self.clock.advance(delay)
        self._run_once(0)


def test_a_wait_is_resumed_at_its_deadline_and_looked_at_at_each_poll():
    host = Host(watch=False)
    clock = Jumping(host).clock
    asked: list[float] = []

    def polled():
        start = clock()
        held = yield from wait_until(lambda: asked.append(clock()) or False, start + 0.3, 0.05)
        return held, clock() - start

    [(held, took)] = carry(host, [polled()], capacity=1)
    assert held is False and took == pytest.approx(0.3)
    assert 4 <= len(asked) <= 9, asked  # once per 50 ms poll, not once per turn


def test_a_step_that_raises_stops_the_other_runs_and_then_propagates():
    host = Host(watch=False)
    released: list[str] = []

    class Run:
        stop_signals = 0

        def stop_signal(self, source):
            self.source = source

    other = Run()

    def waits_for_a_stop():
        host.runs.add(other)  # as runner.steps adds its RunState
        try:
            yield from wait_until(lambda: hasattr(other, "source"))
            released.append(other.source)
        finally:
            host.runs.discard(other)

    def raises():
        yield Wait(lambda: True)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        carry(host, [waits_for_a_stop(), raises()], capacity=2)
    assert released == ["ctrl_c"]


def test_a_predicate_that_raises_is_thrown_into_its_own_run():
    """``done()`` is the run's code: what it raises reaches the run at its yield, so the run
    ends itself (as ``runner.steps`` does, through its release) and the host goes on."""
    host = Host(watch=False)
    ended: list[str] = []

    def interrupted():
        raise KeyboardInterrupt

    def run():
        try:
            yield Wait(interrupted)
        except KeyboardInterrupt as exc:
            host.interrupted(exc)  # as runner.steps hands it over, after its release
            ended.append("released")
        return "ended"

    with pytest.raises(KeyboardInterrupt):
        carry(host, [run()], capacity=1)
    assert ended == ["released"]


def test_two_exits_during_a_third_runs_spawn_are_stamped_at_once(tmp_path, monkeypatch):
    """The real engine: two jobs' roots exit while a third job's (slow) spawn runs; each is
    resumed and ended then, not at the next unrelated event. The third root and a fourth job
    wait on FIFOs (no event meanwhile) that the test opens once the two ended; were the two
    left for an unrelated event, the fourth job's timeout 7 s on would be the first, far enough
    that a loaded host's slow teardown of the two is still told from an ending that waited."""
    from processkit.engine import spawn

    real_spawn = spawn.begin

    def slow_spawn(argv, **options):
        if "slow" in argv:
            time.sleep(0.5)  # the longest step a run takes: the other roots exit meanwhile
        return real_spawn(argv, **options)

    monkeypatch.setattr(spawn, "begin", slow_spawn)
    held = {name: tmp_path / f"{name}.fifo" for name in ("timer", "c")}
    for fifo in held.values():
        os.mkfifo(fifo)
    blocked = 'read line < "$1"'  # blocked in the open until the test's writer comes: no event
    manifest = [
        {"args": ["sh", "-c", blocked, "timer", str(held["timer"])], "id": "timer", "timeout": 7},
        # the roots close their pipes, then exit: the end of file came before, so only the exit
        # collected can wake the run
        {"args": ["sh", "-c", "exec >/dev/null 2>&1; sleep 0.1"], "id": "a"},
        {"args": ["sh", "-c", "exec >/dev/null 2>&1; sleep 0.1"], "id": "b"},
        {"args": ["sh", "-c", blocked, "slow", str(held["c"])], "id": "c"},
    ]
    out = tmp_path / "out"
    failed: list[BaseException] = []

    def release() -> None:
        try:  # once both ended (or the timer's timeout ended them), the third and fourth may end
            waited_for(lambda: all(_has_ended(out / job / "events.jsonl") for job in ("a", "b")), what="a, b ended")
        except BaseException as exc:
            failed.append(exc)
        finally:  # in any case, each: c (no timeout of its own), then the timer unless its timeout ended it
            try:
                os.close(opened_for_writing(held["c"], what="c's FIFO read"))
                timer = waited_for(
                    lambda: writer_of(held["timer"]) or _has_ended(out / "timer" / "events.jsonl"),
                    what="the timer's FIFO read, or its end",
                )
                if type(timer) is int:
                    os.close(timer)
            except BaseException as exc:
                failed.append(exc)

    releaser = threading.Thread(target=release, daemon=True)
    releaser.start()
    run_batch(jobs_from(manifest), Settings(str(out), jobs=4), signals=False)
    releaser.join(SAFETY_NET)

    def stamp(job: str, event: str) -> float:
        for line in (out / job / "events.jsonl").read_text().splitlines():
            found = json.loads(line)
            if found["event"] == event:
                return time.mktime(time.strptime(found["time"][:19], "%Y-%m-%dT%H:%M:%S")) + float(
                    "0" + found["time"][19:-1]
                )
        raise AssertionError(f"no {event} in {job}'s stream")

    spawned = stamp("c", "run_started")
    for job in ("a", "b"):
        assert stamp(job, "runner_exit") - spawned < 4.0, f"{job} ended late"
    assert not failed, failed


def _has_ended(stream) -> bool:
    try:
        return b'"event":"runner_exit"' in stream.read_bytes()
    except FileNotFoundError:
        return False


RING_BYTES = 256 << 20  # the largest ring that keeps the suite fast (docs: a 1 GiB one measured by hand)


def test_a_timeout_fires_on_time_while_another_job_puts_a_big_ring_in_order(tmp_path):
    """A ``--capture-keep tail`` ring is rotated and hashed a bounded chunk per turn: another
    job's 1 s timeout, due in the middle of that work, is reported on time (the stream's own
    stamps, run_started to timeout), not once the whole ring is done. On time is measured
    against the ring's work still left when it fell due (a loaded machine stretches both alike;
    a fixed 100 ms was 2x what a load of 10 showed): the turn that reports it comes within the
    first quarter of that work, while a ring put in order in one go reports it only after all."""
    from conftest import run_cli

    flag = tmp_path / "written"
    writer = (
        "import sys, time; sys.stdout.buffer.write(b'x' * (300 << 20)); sys.stdout.flush(); "
        f"open({str(flag)!r}, 'w').close(); time.sleep(0.5)"
    )
    manifest = tmp_path / "m.jsonl"
    jobs = [
        {"args": [sys.executable, "-c", writer], "id": "ring", "capture_keep": "tail", "capture_max_bytes": RING_BYTES},
        {"args": ["sh", "-c", f"until [ -e '{flag}' ]; do sleep 0.01; done"], "id": "gate"},
        {"args": ["sleep", "30"], "id": "timer", "timeout": 1},  # starts once the ring is full
    ]
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    out = tmp_path / "out"
    proc = run_cli("batch", manifest, "--out", out, "--jobs", "2", timeout=120)
    assert proc.returncode == 117, proc.stderr  # one job timed out

    def stamps(job: str) -> dict[str, float]:
        found = {}
        for line in (out / job / "events.jsonl").read_text().splitlines():
            event = json.loads(line)
            moment = datetime.datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()
            found.setdefault(event["event"], moment)
        return found

    ring, timer = stamps("ring"), stamps("timer")
    due = timer["run_started"] + 1.0
    left = ring["output_captured"] - due
    if not (ring["root_exited"] < due and left >= 0.4):
        pytest.skip("the timeout did not fall due while the ring was put in order (this host is too fast)")
    late = timer["timeout"] - due
    assert -0.1 <= late < left / 4, f"the timeout came {late:+.3f}s off, with {left:.3f}s of the ring's work left"
    assert (out / "ring" / "capture" / "stdout.log").stat().st_size == RING_BYTES


def test_a_run_that_begins_after_a_stop_starts_no_child(tmp_path):
    """Fresh runs start one per turn: a stop that comes before a run's first step (here at once,
    through the batch's stop pipe) still reaches it, so it ends cancelled before its spawn."""
    read_end, write_end = os.pipe()
    os.write(write_end, b"sigterm")
    jobs = jobs_from([{"args": ["sleep", "30"], "id": f"s{n}", "timeout": 2} for n in range(3)])
    try:
        lines, tally = run_batch(jobs, Settings(str(tmp_path / "out"), jobs=3), signals=False, stop_fd=read_end)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert tally.cancelled_by == "sigterm"
    assert sorted((line.id, line.exit_code) for line in lines) == [("s0", 107), ("s1", 107), ("s2", 107)]
    for n in range(3):
        events = [json.loads(line) for line in (tmp_path / "out" / f"s{n}" / "events.jsonl").read_text().splitlines()]
        assert "run_started" not in [event["event"] for event in events]


def test_a_root_no_pidfd_announces_is_still_collected_in_a_callers_process(tmp_path, monkeypatch):
    """No pidfd (an old kernel) and no SIGCHLD watch (a host inside someone else's process):
    the reaper looks at such roots itself, so the run ends with its child's exit, not with
    its timeout."""
    monkeypatch.setenv("PROCESSKIT_SPAWN", "python")  # the fallback's child comes without a pidfd

    def no_pidfd(pid, flags=0):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    jobs = jobs_from([{"args": ["sh", "-c", "exit 3"], "id": "quiet", "timeout": 5}])
    lines, _ = run_batch(jobs, Settings(str(tmp_path / "out"), jobs=1), signals=False)
    assert [(line.exit_code, line.source) for line in lines] == [(3, "child_exit")]
