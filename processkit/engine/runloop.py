"""One run's view of its host's loop (``RunLoop``): every callback a run puts on the shared loop
marks that run runnable once it has run, which is how the host's scheduler (``scheduler``) learns
which runs to look at after a turn without asking every run; and runs under that run's guard:
an ``Exception`` it raises is the run's own failure, handed to the scheduler (``fail``), which
throws it into the run at its yield, never out of the loop into the host and every other run it
carries (a ``try`` that costs nothing while nothing raises on CPython 3.11 and later, whose
exception tables replaced 3.10's block set-up: one block more a call there, two bytecodes)."""

from __future__ import annotations

from ..loop import Loop

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from ..loop import Callback, Timer


class RunLoop(Loop):
    """One run's view of the host's loop: every callback it registers marks the run runnable
    once it has run, and hands ``fail`` whatever ``Exception`` it raised. Only the host turns
    the loop: a run never does (``run_once``)."""

    def __init__(  # noqa: D107 - shares, not makes, a loop
        self,
        loop: Loop,
        wake: Callable[[], None],
        others_waiting: Callable[[], bool],
        fail: Callable[[Exception], None],
    ) -> None:
        self._shared = loop
        self.wake = wake
        self._fail = fail
        self._others_waiting = others_waiting  # the host's runs queued for after this turn

    @property
    def now(self) -> float:
        return self._shared.now

    @now.setter
    def now(self, value: float) -> None:
        self._shared.now = value

    def waking(self, callback: Callable[..., None], off: Callable[[], None] | None = None) -> Callable[..., None]:
        """``callback`` that marks this run runnable after it has run, an ``Exception`` it
        raised handed to the run (``fail``) instead of its caller: the loop, or another run's
        step (the reaper routing a root's exit from whichever run collected it). ``off``: what
        takes it off the loop (its descriptor's watch), done at its second fault: a descriptor
        the kernel reports ready at every turn (level-triggered) whose callback keeps raising
        spun the loop until the run's end, a raise a turn."""
        wake, fail = self.wake, self._fail
        faults = 0

        def woken(*args) -> None:
            nonlocal faults
            try:
                callback(*args)
            except Exception as exc:  # noqa: BLE001 - this run's own failure, not its caller's
                fail(exc)
                faults += 1
                if faults > 1 and off is not None:
                    off()
            finally:
                wake()

        return woken

    def clock(self) -> float:
        return self._shared.clock()

    def share(self, budget: int) -> int:
        return self._shared.share(budget)

    def stay_bound(self, longest: float) -> tuple[int, float] | None:
        """None while another run of the host waits to be resumed after this turn: a stay would
        hold it up (its next job's start, say) until the stay's own bound."""
        return None if self._others_waiting() else self._shared.stay_bound(longest)

    def call_at(self, when: float, callback: Callback) -> Timer:
        return self._shared.call_at(when, self.waking(callback))

    def call_later(self, delay: float, callback: Callback) -> Timer:
        return self._shared.call_at(self._shared.now + delay, self.waking(callback))

    def add_reader(self, fd: int, callback: Callback) -> None:
        self._shared.add_reader(fd, self.waking(callback, lambda: self._shared.remove_reader(fd)))

    def remove_reader(self, fd: int) -> None:
        self._shared.remove_reader(fd)

    def add_writer(self, fd: int, callback: Callback) -> None:
        self._shared.add_writer(fd, self.waking(callback, lambda: self._shared.remove_writer(fd)))

    def remove_writer(self, fd: int) -> None:
        self._shared.remove_writer(fd)

    def run_once(self, max_wait: float | None = None) -> None:
        raise RuntimeError("a run never turns the host's loop: it yields a Wait")

    def run_until(self, done: Callable[[], bool], deadline: float | None = None, poll: float | None = None) -> bool:
        raise RuntimeError("a run never turns the host's loop: it yields a Wait")

    def close(self) -> None:
        raise RuntimeError("the host's loop is the host's to close")
