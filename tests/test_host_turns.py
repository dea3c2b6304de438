"""The host's turns: an exit that came while a run was busy is taken before a fresh run's setup
(the longest step), so the ended run is resumed, and stamped, without waiting for that setup."""

from __future__ import annotations

import os

from processkit.engine.host import Host, wait_until


def test_a_run_whose_event_came_is_resumed_before_a_fresh_run_starts():
    host = Host(watch=False)
    order: list[str] = []
    read_end, write_end = os.pipe()
    woken = []
    host.loop.add_reader(read_end, lambda: woken.append(os.read(read_end, 1)))

    def waiter():
        yield from wait_until(lambda: bool(woken))
        order.append("waiter resumed")

    def quick():
        os.write(write_end, b"x")  # the event the waiter waits for comes while this run works
        order.append("quick ran")
        yield from ()

    def fresh():
        order.append("fresh started")
        yield from ()

    runs = [fresh(), quick(), waiter()]
    try:
        host.carry_all(lambda: runs.pop() if runs else None, lambda result: None, capacity=2)
    finally:
        host.loop.remove_reader(read_end)
        os.close(read_end)
        os.close(write_end)
        host.close()
    assert order == ["quick ran", "waiter resumed", "fresh started"]


def test_a_wait_that_already_holds_asks_its_predicate_once():
    """Teardown's predicates read the kernel's files (the group's members): a wait that holds at
    once must not read them twice."""
    asked = []

    def done():
        asked.append(1)
        return True

    steps = wait_until(done)
    try:
        next(steps)
    except StopIteration as stop:
        assert stop.value is True
    else:
        raise AssertionError("a wait that holds must not yield")
    assert len(asked) == 1
