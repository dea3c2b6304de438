"""What a run yields to its host: a ``Wait``, and ``wait_until`` to yield one from a run's steps
(``until_readable``: one that ends once a descriptor is readable, the exec's report or a
template's pipe), and ``carried`` to carry such steps on a loop without a host's scheduler.

A module of its own, importing nothing: everything a run's steps reach (the echo, the ring's
finishing, the teardown) yields through it, below the host that carries them.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from ..loop import Loop


class Wait:
    """What a run waits for: ``done()``, or the loop's clock reaching ``deadline``; ``poll``
    bounds each look when nothing wakes the run for it. ``asked``: ``done()`` was false just
    before the yield (``wait_until``), so the host need not ask again at once."""

    __slots__ = ("done", "deadline", "poll", "asked")

    def __init__(
        self, done: Callable[[], bool], deadline: float | None = None, poll: float | None = None, asked: bool = False
    ):
        self.done = done
        self.deadline = deadline
        self.poll = poll
        self.asked = asked


def wait_until(done: Callable[[], bool], deadline: float | None = None, poll: float | None = None):
    """``yield from`` this in a run: resumes once ``done()`` or at ``deadline``; returns ``done()``
    (asked once when it already holds: some are reads of the kernel's files)."""
    if done():
        return True
    yield Wait(done, deadline, poll, asked=True)
    return done()


def carried(loop: Loop, steps):
    """A run's steps carried straight on ``loop`` by a carrier that turns it itself, one run at a
    time (``bench``'s direct sample): each ``Wait`` turned until done or its deadline; returns
    what the steps return."""
    try:
        wait = next(steps)
        while True:
            loop.run_until(wait.done, wait.deadline, wait.poll)
            wait = steps.send(None)
    except StopIteration as stop:
        return stop.value
    finally:  # an interrupt out of run_until: the steps' own finally blocks run now, not at collection
        steps.close()


def until_readable(loop: Loop, fd: int, stopping: Callable[[], bool], deadline: float | None = None):
    """``yield from`` this in a run: resumes once ``fd`` is readable, ``stopping()`` holds (the
    host wakes the run for it: a stop), or at ``deadline`` (the caller looks again at what it
    waits for).
    ``loop``: the run's view of its host's loop (``RunLoop``), whose callback wakes it; ``fd``
    is on the loop only while the run waits (its owner may close it once this returns)."""
    readable: list[bool] = []
    loop.add_reader(fd, lambda: readable.append(True))
    try:
        yield from wait_until(lambda: bool(readable) or stopping(), deadline)
    finally:
        loop.remove_reader(fd)
