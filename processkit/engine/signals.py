"""Turns signals into readable bytes for the loop.

``set_wakeup_fd`` writes each caught signal's number to a non-blocking pipe; the Python-level
handler only notes that one came (``caught``), so no work ever happens inside a signal handler.
CPython runs that handler in the main thread between bytecodes soon after the signal arrives,
so a look that finds nothing noted (``dispatch_caught``, before each spawn) needs no read of
the pipe: a signal too late for the note is one that came just after the look. (A pipe, not a socket
pair: on Linux either works, and a pipe spares the run the ``socket`` module.) A stop signal that
was ignored when the runner started (``nohup``) stays ignored and is never watched. A signal
can be watched later too (``watch``): the host watches SIGCHLD only once a root has no pidfd or
the process adopts orphans. Until then SIGCHLD keeps its default disposition, under which the
kernel drops it (no auto-reaping: that is what ``SIG_IGN`` would do, losing exit statuses), so a
run whose root's pidfd announces its exit pays no signal delivery, wake-up write and read.
``watch_for_host`` is what a host's signals are routed to: a stop signal to every run, SIGWINCH
to a ``--pty`` run's terminal, SIGCHLD to the reaper once it asks, SIGTSTP to ``suspend``.

SIGTSTP (Ctrl-Z) reaches only the terminal's foreground group, which in the default mode is the
runner's and not its children's (each child leads a group of its own): left at its default, it
stopped the runner alone while its tree went on running in the background, and the shell called
the job stopped. So the runner stops like a job, whole: ``suspend`` sends SIGTSTP to every run's
tree, stops the runner itself with SIGTSTP at its default, and once continued (``fg``, ``bg``)
sends the trees SIGCONT. A SIGTSTP ignored at start stays ignored, as a stop signal does; once the
watch is closed SIGTSTP (with SIGWINCH and SIGCHLD) gets back the disposition it had.
"""

from __future__ import annotations

import os

from .. import native
from .. import signum as signals
from ..errors import Failure
from ..writeall import doubt_own
from .pump import select_backend

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from ..loop import Loop
    from .reaper import Reaper

# The runner's stop signals and the ``cancelled.source`` each one reports.
STOP_SIGNALS: dict[int, str] = {
    signals.SIGINT: "ctrl_c",
    signals.SIGTERM: "sigterm",
    signals.SIGHUP: "sighup",
}
# The ``cancelled.source`` of a run whose caller is gone (the API's caller ended: its connection,
# or a batch's stop descriptor, at end of file), for the runner service's runs and a batch's jobs
# alike: the events schema's closed set of sources has no word of its own for it, and the
# hung-up controller is the nearest. (The batch's own tally names it: ``on_host.CALLER_GONE``.)
CALLER_GONE_SOURCE = signals.CALLER_GONE_SOURCE
assert STOP_SIGNALS[signals.SIGHUP] == CALLER_GONE_SOURCE


def stop_came(number: int) -> str:
    """The ``cancelled.source`` of the stop signal ``number``, which came: the runner's own lines
    on its stdout and stderr, where a terminal, wait a bounded time from now on
    (``writeall.doubt_own``)."""
    doubt_own()
    return STOP_SIGNALS[number]


# A Python handler cannot take these (it runs later, so a real fault would run its faulting
# instruction again, for good). Guarded in C where the C module is built and ``PROCESSKIT_PUMP`` is
# not ``python`` (csrc/faults.c: one sent, ``si_code`` <= 0, is dropped; a real fault puts back the
# action before, the default or faulthandler's, and repeats under it). Else blocked
# (``pthread_sigmask``): one sent waits, blocked, for good; a real fault while its signal is blocked
# is delivered by the kernel at its default action all the same, faulthandler's report not written
# (docs/differences.md). Every run's child gets an empty mask (the engine's spawns, the
# service's ``spawned.start``) and, its handler reset by ``execve``, the default action. The CLI's
# runner (``run``, ``batch``, ``bench``: ``watch_for_host``) and the API's service guard them alike.
FAULTS = ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL")


def guard_faults() -> None:
    """Drop ``FAULTS`` sent by another process (a child's ``kill -SEGV $PPID``); a real fault ends this process."""
    try:
        chosen = select_backend()  # the pump's switch: the guard is built with it
    except Failure:  # native demanded, not built: each run fails its set-up so (``launch``); the process lives
        chosen = "python"
    built = native.module() if chosen == "native" else None
    if built is not None and built.lib.pk_guard_faults() == 0:
        return
    signals.pthread_sigmask(signals.SIG_BLOCK, signals.named(FAULTS))


# Signals whose default action ends a process and that no fault of its own raises, and that no terminal sends: a
# child (the runner's user, with the runner as its parent) may send one meant for "its parent", the caller it would
# have under subprocess (an X server's SIGUSR1 when it is ready, a readiness or a timer signal), and it ended the
# runner, the CLI's ``run``, ``batch`` and ``bench`` or the API's service, and every run it carried: their output
# after it lost, their streams cut before ``runner_exit``. They are caught and dropped (``drop_strays``; a caught
# signal is back at its default in every child the runner starts). One inherited as ignored stays ignored. SIGQUIT
# keeps its default. So are SIGABRT and SIGTRAP, sent by a child just as well, whose catching still ends a process
# whose own fault raised one (``abort`` raises it again at its default), or lets it go on sound. SIGXCPU and SIGSYS
# keep their default: the kernel's own (a soft CPU limit, ``prlimit --cpu=1:unlimited``, with no hard one to follow;
# seccomp's ``SECCOMP_RET_TRAP``, whose system call dropped would seem to have succeeded) must end the runner, as a
# child's ``kill`` of them does. SIGSEGV, SIGBUS, SIGFPE and SIGILL are not: a Python handler runs later, so a real
# fault would run its faulting instruction again, for good (guarded in C instead: ``guard_faults``).
STRAY_SIGNALS = (
    "SIGUSR2",
    "SIGALRM",
    "SIGVTALRM",
    "SIGPROF",
    "SIGIO",
    "SIGPWR",
    "SIGSTKFLT",
    "SIGABRT",
    "SIGTRAP",
)


def drop_strays(also: tuple[str, ...] = ()) -> None:
    """Catch and drop ``STRAY_SIGNALS``, ``also`` and the real-time signals where each is at its
    default; for good: a late one (the teardown, the sweep, a batch's page) is dropped too."""
    for number in signals.numbers((*STRAY_SIGNALS, *also)):
        if signals.getsignal(number) == signals.SIG_DFL:
            signals.signal(number, _dropped)


def _dropped(number, frame) -> None:
    """A stray signal's handler: nothing to do (the wake-up pipe's reader ignores its number)."""


DISPATCH_PASSES = 3  # passes of one ``dispatch_caught``: what a flood brings after them waits for the loop


class SignalWatch:
    def __init__(self, loop: Loop, handlers: dict[int, Callable[[int], None]]):
        self._loop = loop
        self._reader, self._writer = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._previous_fd = signals.set_wakeup_fd(self._writer, warn_on_full_buffer=False)
        self._handlers: dict[int, Callable[[int], None]] = {}
        self._found: dict[int, object] = {}  # each watched signal's disposition before the watch
        self._caught = False  # a watched signal came since the pipe was last read
        for signum, handler in handlers.items():
            self.watch(signum, handler)
        loop.add_reader(self._reader, self.dispatch)

    @property
    def fd(self) -> int:
        """The wake-up pipe's read end (-1 once closed): a wait outside the loop (the native
        spawn's, in C) polls it too, so a signal caught just before that wait still ends it."""
        return self._reader

    def watch(self, signum: int, handler: Callable[[int], None]) -> bool:
        """Deliver ``signum`` to ``handler`` from now on (a stop signal ignored at start stays so);
        whether the watch begins now (not already taken, nor left ignored)."""
        inherited_ignore = signum in STOP_SIGNALS or signum == signals.SIGTSTP
        if signum in self._handlers or (inherited_ignore and signals.getsignal(signum) == signals.SIG_IGN):
            return False
        self._found[signum] = signals.signal(signum, self._absorb)
        self._handlers[signum] = handler
        return True

    def stop_at_once(self, signum: int, trees: Callable[[int], None]) -> None:
        """``signum`` (SIGTTOU) stops the runner with its trees in its handler, not from the loop:
        the kernel sends it to a background job's write on a terminal with ``tostop`` set and the
        write fails (EINTR), and the interpreter retries it at once, so a handler that only noted
        it would have the write send it again, for good, before the loop could look. The runner
        alone stopped at its default while its trees ran on. Its disposition is given back on
        close; one ignored at start (or while a terminal is lent) is left as it is."""
        if signals.getsignal(signum) != signals.SIG_DFL:
            return
        self._found[signum] = signals.signal(signum, lambda number, frame: suspend(trees, number))

    def supply(self, signum: int) -> None:
        """``signum`` dispatched on the loop's next turn as if it had come: one that may have come
        before the watch, which the kernel dropped at the default disposition."""
        os.write(self._writer, bytes((signum,)))

    def _absorb(self, signum, frame) -> None:  # the wakeup fd carries the signal number
        self._caught = True

    def dispatch_caught(self) -> None:
        """``dispatch`` where a signal came since the last one (the runner's look before it spawns,
        and after each loop turn), again while one came as the handlers ran: a stop signal caught
        while a SIGCHLD's ``reap`` found the root's exit ranks in that turn, as one caught before.
        At most ``DISPATCH_PASSES`` passes: a flood of signals holds no turn (the rest wake the loop)."""
        for _ in range(DISPATCH_PASSES):
            if not self._caught:
                return
            self.dispatch()

    def dispatch(self) -> None:
        """Run the handlers of the signals caught so far; the loop calls this whenever one
        arrives."""
        self._caught = False
        try:
            data = os.read(self._reader, 4096)
        except BlockingIOError:
            return
        for signum in dict.fromkeys(data):  # a burst of one signal is one fact
            handler = self._handlers.get(signum)
            if handler is not None:
                handler(signum)

    def close(self) -> None:
        """Stop watching; the stop signals' handlers stay installed, so late ones are absorbed, not
        fatal. Every other watched signal gets back the disposition it had: a SIGTSTP absorbed
        once nothing suspends the runs would make Ctrl-Z do nothing while the carrier finishes
        (a batch's page, its JUnit file, a run's sweep and ``--usage-file``). Idempotent."""
        if self._reader < 0:
            return
        for signum, found in self._found.items():
            if signum not in STOP_SIGNALS and found is not None:
                signals.signal(signum, found)  # type: ignore[arg-type]
        self._loop.remove_reader(self._reader)
        signals.set_wakeup_fd(self._previous_fd)
        os.close(self._reader)
        os.close(self._writer)
        self._reader = self._writer = -1


def suspend(trees: Callable[[int], None], signum: int = signals.SIGTSTP, group: bool = False) -> None:
    """Stop like a job: ``trees`` (which signals every run's tree) gets SIGTSTP, the runner stops
    (by ``signum``, so its shell says why: SIGTSTP, or SIGTTOU for a background write), and once
    it is continued the trees get SIGCONT. ``group``: the runner's whole process group stops by
    ``signum``, the job a shell waits on, as a stop the terminal sent it would (lending's
    ``stopped_in_front``: the terminal stopped the child's group, not the runner's, and a wrapper
    the runner shares its group with, ``sh -c``, ``make``, is the shell's child). Either way the
    runner's own stop takes effect before the call returns (``raise_signal`` is directed at this
    thread; ``killpg`` from the main thread takes its signal there as it returns); a runner in an
    orphaned group is not stopped by the kernel, and its trees are continued at once."""
    trees(signals.SIGTSTP)
    handler = signals.signal(signum, signals.SIG_DFL)
    try:
        if group:
            os.killpg(0, signum)
        else:
            signals.raise_signal(signum)
    finally:
        signals.signal(signum, handler)
    trees(signals.SIGCONT)


def watch_for_host(
    loop: Loop,
    stop: Callable[[str], None],
    reaper: Reaper,
    resize: Callable[[], None] | None = None,
    trees: Callable[[int], None] | None = None,
    children_stopped: Callable[[], None] | None = None,
) -> SignalWatch:
    """A host's signal watch: a stop signal calls ``stop`` with its ``cancelled.source``,
    SIGWINCH calls ``resize``, SIGTSTP stops ``trees`` and the runner (``suspend``), and
    SIGCHLD is watched for ``reaper`` once it asks, and also calls ``children_stopped`` (a
    child given the terminal may have stopped: ``Host.watch_child_stops``)."""
    handlers: dict[int, Callable[[int], None]] = {
        number: lambda number: stop(stop_came(number)) for number in STOP_SIGNALS
    }
    if trees is not None:
        handlers[signals.SIGTSTP] = lambda number: suspend(trees)
    if resize is not None:
        handlers[signals.SIGWINCH] = lambda number: resize()
    guard_faults()  # a child's ``kill -SEGV $PPID`` is dropped, a real fault still ends the runner
    drop_strays(also=("SIGUSR1",))  # free here: the service's parent-death signal has its handler already
    if signals.getsignal(signals.SIGCHLD) == signals.SIG_IGN:  # inherited: the kernel would reap the roots unseen
        signals.signal(signals.SIGCHLD, signals.SIG_DFL)
    watch = SignalWatch(loop, handlers)
    if trees is not None:
        watch.stop_at_once(signals.SIGTTOU, trees)

    def sigchld(number: int) -> None:
        reaper.reap(signalled=True)
        if children_stopped is not None:
            children_stopped()

    def wants_sigchld() -> None:
        if watch.watch(signals.SIGCHLD, sigchld):
            watch.supply(signals.SIGCHLD)  # one the kernel dropped before the watch (an orphan's exit)

    reaper.wants_sigchld = wants_sigchld
    return watch
