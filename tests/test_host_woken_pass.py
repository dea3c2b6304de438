"""Runs woken in one turn are resumed one after another; while one's step runs, the others of
that pass still wait to be resumed, and a step that asks whether any run waits (``RunLoop.
stay_bound``: the native pump's stay, which keeps the turn in C while none does) hears so.
Before, the pass was taken off the run queue whole, so the first run's step saw none waiting and
its stay could hold the others up to its bound."""

from __future__ import annotations

import os

from processkit.engine.host import Host
from processkit.engine.waits import wait_until


def test_a_step_sees_the_runs_woken_beside_it_waiting():
    host = Host(watch=False)
    pipes = [os.pipe(), os.pipe()]
    asked: list[bool] = []  # per resumption, in order: whether stay_bound found others waiting

    def waiter(index: int):
        read_end, _ = pipes[index]
        woken: list[bytes] = []
        host.run_loop().add_reader(read_end, lambda: woken.append(os.read(read_end, 1)))
        if index == 1:  # both waits are set now: both events come before the next turn
            for _, write_end in pipes:
                os.write(write_end, b"x")
        yield from wait_until(lambda: bool(woken))
        host.loop.remove_reader(read_end)
        asked.append(host.run_loop().stay_bound(1.0) is None)

    pending = [waiter(1), waiter(0)]
    try:
        host.carry_all(lambda: pending.pop() if pending else None, lambda result: None, 2)
    finally:
        host.close()
        for read_end, write_end in pipes:
            os.close(read_end)
            os.close(write_end)
    assert asked == [True, False], "the first resumed must see the second waiting; the last, none"
