"""The caller's side of its runner service (``processkit.service.serve``): one service and the socket
to it, shared by every thread of the process.

Facts about sharing one socket between threads: each request has its own id, and its replies
wait in a mailbox of their own. Whichever waiting thread finds the socket free reads it and
files what arrives under each reply's id (the library's own thread only as ``relay`` says); every
other waiting thread sleeps on a lock of its own (``bells``), which the reader releases only when a
reply to that thread's request is filed. A thread that leaves ``take`` while nobody reads (its
reply came, its time ran out, it was interrupted while reading) wakes one sleeper, which reads
next: the socket has a reader whenever anyone waits.
Sends are whole frames under a lock; no lock is held across a round trip, so the calls of many
threads are in flight in the service at once. Which connection a call goes to is ``shared``'s.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import socket
import subprocess
import sys
import threading
import time
import weakref

from ..plain import counter
from . import at_exit, bells, caller_env, reentry, relay, starting, stopped, wire
from .sending import Sender, ServiceGone, ServiceUnstartable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from ..errors import Failure


COLLECT_SECONDS = 1.0  # how long a service that ended (its end of file came) or was killed is waited for
# How long a starting service has to say hello: a fresh interpreter, on a loaded host, takes a
# second or two; one whose start blocked (a stop ``stopped.look`` does not undo included) held
# the call for ever. As long as the CLI's detached launch waits for its run (docs/control-plane.md §3).
HELLO_SECONDS = 30.0


def service_command(fd: int, caller: int) -> list[str]:
    """The service's command line: a fresh interpreter, given its end of the socket and the
    caller it serves (bench/api_overhead.py wraps it in a profiler)."""
    return [sys.executable, "-c", "from processkit.service.serve import main; main()", str(fd), str(caller)]


def out_of_descriptors(exc: OSError) -> Exception:
    """What the caller raises when starting its service failed with ``exc``: out of descriptors
    (EMFILE, ENFILE: its socket or the start's own pipe), a ``ServiceUnstartable`` naming the limit
    (``fdlimit.exhausted``), where a bare ``Too many open files`` said nothing of which; else ``exc``."""
    if exc.errno not in (errno.EMFILE, errno.ENFILE):
        return exc
    from ..fdlimit import exhausted

    return ServiceUnstartable(exhausted("to start the runner service"))


class Connection(Sender):
    """One runner service and the socket to it."""

    def __init__(self) -> None:
        try:
            mine, theirs = map(wire.above_the_standard_numbers, socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM))
        except OSError as exc:
            raise out_of_descriptors(exc) from None
        inherited = caller_env.inherited()  # before the start: a change meanwhile is sent, never lost
        try:
            self.process = subprocess.Popen(
                service_command(theirs.fileno(), os.getpid()),
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=caller_env.service_environment(),
                cwd="/",
            )
        except BaseException as exc:
            mine.close()
            if isinstance(exc, OSError):
                raise out_of_descriptors(exc) from None
            raise
        finally:
            theirs.close()
        self.sock = mine
        self.ident = wire.identity(mine.fileno())
        self.owner = os.getpid()
        self.fingerprint = caller_env.fingerprint()
        self.credentials = caller_env.credentials()  # who started it: its children are that user's
        self.gone = False
        self.replaced = False  # by another (``retire_if_idle``): retired once its last request is forgotten
        self._live.add(self)
        self.sent_env: tuple = inherited  # the environment, umask and limits last sent (``caller_env.changed``)
        self.sent_spec: tuple | None = None  # (type, field values, request id) of the last run request's spec
        self.unrecorded = False
        self.heard = time.monotonic()  # when a frame last came (``stopped.look``: the reader's only)
        self._frames = wire.Frames(lenient=False)
        self._readable = select.poll()
        self._readable.register(mine.fileno(), select.POLLIN)
        self._ids = counter(1)
        self._send_lock = threading.Lock()
        self._mail = threading.RLock()  # guards the boxes, the sleepers and who reads (its holder known: ``suspended``)
        self._reading = 0  # the thread reading the socket (at most one at a time), 0 when none
        self._sleeping = bells.Bells()  # rid -> the held locks its waiters sleep on
        self._boxes: dict[int, list[tuple]] = {0: []}
        self._woken: dict[int, Callable[[], None]] = {}  # rid -> told when a reply is filed (asyncio)
        hello = starting.awaited(self, HELLO_SECONDS)
        if hello[3] is None:  # it could not start (serve.main): why; closed, collected within a bound (one in
            self.retire()  # uninterruptible sleep is left for a later Popen to reap: subprocess._cleanup)
            raise ServiceUnstartable(hello[4]["failure"])
        self.pid: int = hello[2]
        self.scratch: str = hello[3]
        # What this service reads beyond a whole request (one of another checkout may not: bench/api_overhead.py).
        self.spec_changes = len(hello) > 4 and bool(hello[4].get("spec_base") or hello[4].get("spec_changes"))
        self.mark: bytes = (
            hello[4].get("mark", b"") if len(hello) > 4 else b""
        )  # after each frame's header (``wire.Frames``)

    def holds(self, rid: int) -> bool:
        """Whether ``rid``'s replies are still wanted (not forgotten)."""
        return rid in self._boxes

    idle = property(lambda self: len(self._boxes) == 1, doc="No request open on it but the hello's (box 0).")

    def filed_failure(self, rid: int) -> Failure | None:
        """The failure the service filed for the request ``rid`` it let go without starting the
        process that answers it (``frames.Dropped``), as its code and one line; None where none came."""
        filed = self.take(rid, timeout=1)
        report = filed[2] if filed is not None and filed[0] == "done" else {}
        failure = report.get("failure")
        if failure is None:
            return None
        from ..errors import Failure, kind_labelled

        return Failure(kind_labelled(failure[0], report["code"]), failure[1], code=report["code"])

    @reentry.counted
    def take(self, rid: int, timeout: float | None = None, keep: bool = False) -> tuple | None:
        """The next reply to ``rid``; None once ``timeout`` seconds passed without one. ``keep``: the
        reply stays filed for every other thread waiting for it (a started run's one reply: several
        may wait on its handle at once, as on a Popen), until ``forget``; a request forgotten (another
        waiter took its reply and let it go) has None at once."""
        self.interrupted(rid)
        if not self.gone and (self._reading == threading.get_ident() or self._mail._is_owned()):  # type: ignore[attr-defined]
            box = self._boxes.get(rid)  # None: forgotten (another waiter took the reply and let it go)
            return None if box is None else reentry.suspended(box, timeout, self._mail._is_owned(), keep)  # type: ignore[attr-defined]
        deadline = None if timeout is None else time.monotonic() + timeout
        looked = False  # with no time left, the socket is still read once
        try:
            while True:
                with self._mail:
                    box = self._boxes.get(rid)
                    if box is None:
                        return None
                    if box:
                        return box[0] if keep else box.pop(0)
                    if self.gone:
                        raise ServiceGone.of(self.owner)
                    left = None if deadline is None else max(0.0, deadline - time.monotonic())
                    if left == 0 and looked:
                        return None
                    looked = True
                    if self._reading:
                        if left == 0:
                            continue
                        bell = self._sleeping.hang(rid)
                    else:  # the main thread's wait (not a look), while another's call is open: a thread's read (``relay``)
                        if not (relayed := left != 0 and relay.wanted(self._boxes.values())):
                            self._reading = threading.get_ident()
                        bell = None
                if bell is not None:  # another thread reads: this one sleeps until it is rung
                    try:
                        bell.acquire(timeout=-1 if left is None else left)
                    finally:
                        with self._mail:
                            self._sleeping.unhang(rid, bell)
                    continue
                wait = stopped.WATCH_SECONDS if left is None else min(left, stopped.WATCH_SECONDS)
                if relayed:
                    relay.read(self._relayed, wait)
                    continue
                self._read_or_look(wait, relayable=wait > 0)  # a look reads for itself: it never relays
                with self._mail:
                    self._reading = 0
        finally:  # whatever was raised since this thread took the reader's role, it gives it back here
            self._hand_over()

    def _relayed(self, wait: float) -> None:
        """A read for the main thread (``relay``): the reader's role taken unless another thread reads, and given back."""
        with self._mail:
            if self._reading:
                return
            self._reading = threading.get_ident()
        try:
            self._read_or_look(wait)
        finally:
            self._hand_over()

    def _read_or_look(self, wait: float, relayable: bool = False) -> None:
        if not self._read(wait, relayable):  # nothing came, however short the wait: nor for a while?
            stopped.look(self)  # a signal may have stopped the service

    def _hand_over(self) -> None:
        """A thread leaving ``take`` (or the loop's reader) gives the reader's role back if it held it
        (an interruption anywhere after taking it: the socket was never read again, and every later call
        slept for ever), and wakes one sleeper when nobody reads, so the socket always has a reader while
        anyone waits: one wake-up, never all of them."""
        with self._mail:
            if self._reading == threading.get_ident():
                self._reading = 0
            if not self._reading:
                self._sleeping.ring_one()

    def forget(self, rid: int) -> None:
        """No more replies to ``rid`` are wanted."""
        with reentry.busy, self._mail:
            self._boxes.pop(rid, None)
            self._woken.pop(rid, None)
            self._sleeping.ring(rid)  # another thread waiting for it (a handle's) wakes to find it gone
        if self.replaced and not self.gone:  # the last call it carried: collected, not left a zombie
            self.retire_if_idle()

    def wake(self, rid: int, callback: Callable[[], None] | None) -> None:
        """Call ``callback`` (from whichever thread reads) whenever a reply to ``rid`` is filed,
        or the service ends; None stops it."""
        with reentry.busy, self._mail:
            if callback is None:
                self._woken.pop(rid, None)
            else:
                self._woken[rid] = callback

    @reentry.counted
    def read_now(self) -> None:
        """Read what the socket holds, unless another thread reads it (an event loop's reader: it must not wait)."""
        if self._reading == threading.get_ident():  # a handler under this thread's own read
            return
        try:  # the role taken inside: whatever is raised as it is taken, it is given back
            with self._mail:
                if self._reading:
                    return
                self._reading = threading.get_ident()
            self._read(0)
        finally:
            self._hand_over()

    def _read(self, timeout: float | None, relayable: bool = False) -> bool:
        """One read of the socket, its frames filed by request id and their waiters rung (the
        reading thread only); False when ``timeout`` passed with nothing to read. ``relayable``: none
        (a relay's next, ``take``) once another thread opened a request as the main thread waited."""
        # Waited for in poll, never in recvmsg: a reader asleep there is woken whenever the service
        # takes a request of this process (the kernel wakes a stream socket's every waiter to say
        # there is room to write), two context switches a call for nothing; poll wakes for the reply.
        cut = self._frames.broken  # a read cut short whose giving up was cut too (a second Ctrl-C): retired
        wait = -1 if timeout is None else max(0, int(timeout * 1000 + 0.999))
        if not cut and self.intact() and not self._readable.poll(wait):
            return False
        if relayable and not cut and relay.wanted(self._boxes.values()):
            return True  # an interruption as a read returns would cut its bytes: a relay reads them
        if cut or not self.intact():  # or the caller closed the number (before or in the wait; reused?): never read
            self._ended(given_up=cut)
            return True
        try:  # the stream stays marked cut until the frames read are filed: until then only a local holds them
            messages = wire.receive(self.sock, self._frames, space=0, kept=False)  # no descriptor comes
            if messages is not None:
                replies = [m for m, _ in messages]
                asked = [m for m in replies if m[0] == "whole"]  # a spec the service asks for (``sending``)
                self.note_refused(replies)  # before a waiter is woken: its next call carries it
                with self._mail:
                    self.heard = time.monotonic()
                    woken = self._sleeping.file(
                        [m for m in replies if m[0] != "whole"] if asked else replies, self._boxes, self._woken
                    )
                    self._frames.broken = bool(asked)
                if asked:  # before the read is kept: an interruption gives the connection up, never leaves one held
                    self.answer_whole(asked)
                    self._frames.broken = False
        except BaseException as exc:
            if not isinstance(exc, OSError) or exc.errno is None or self._frames.broken:
                if not self.gone:  # else given up already (``answer_whole``'s write cut): ended once
                    self._ended(given_up=True)  # a signal handler raised: what was read may be lost
                raise
            messages = None
        if messages is None:
            self._ended()  # the end of the stream, or the socket failed: the service has ended
            return True
        for callback in woken:  # every reply is filed: whatever a callback raises loses none
            callback()
        return True

    def _ended(self, given_up: bool = False) -> None:
        """The service's end of file came: it is collected (up to ``COLLECT_SECONDS``) and every
        waiter told. ``given_up``: a frame was cut short (a signal handler raised as a request was
        written, or a reply read or filed: read on from the wrong byte, every later call hung): the
        socket is closed, the service (continued if a signal stopped it) stops its runs through their
        release and ends (up to ``HELLO_SECONDS``) before the interruption goes on; the next call starts another."""
        self.gone = True  # first: whatever interrupts what follows, no call waits on this service
        if given_up:
            wire.let_go(self.sock, self.ident)  # the poll registered on it is never used again (gone)
        try:  # every waiter told first: none waits out the service's end, nor misses it for a Ctrl-C
            with self._mail:
                woken = list(self._woken.values())
                self._sleeping.ring_all()
            for callback in woken:
                callback()
        finally:
            if self.owner == os.getpid():
                # given up: a service a signal stopped (its socket full, a send blocked) must see the end
                with contextlib.suppress(subprocess.TimeoutExpired):
                    stopped.collect(self.process, HELLO_SECONDS if given_up else COLLECT_SECONDS, continues=given_up)

    @reentry.counted  # a handler run inside its look at the mailbox goes to a spare, not this one
    def intact(self, looks: bool = True) -> bool:
        """The socket's descriptor is still this connection's (a caller that closed it, ``os.closerange``,
        may have had its number reused since: let go, never written to or closed) and no read of it was cut short."""
        self.gone = self.gone or not wire.still_ours(self.sock, self.ident)
        # ``looks``: a cut read whose giving up was cut too (a second Ctrl-C) looked for (never under the send lock)
        if looks and not self.gone and self._frames.broken:
            with self._mail:  # marked, nobody reading (the mark is also a read under way's, a handler's own thread's)
                cut = not self.gone and self._frames.broken and not self._reading
                self.gone = self.gone or cut  # claimed: retired once
            if cut:
                self._ended(given_up=True)
        return not self.gone

    def usable(self) -> bool:
        """A call may go to it: it is this process's (not a forked parent's), its socket is still its own
        (``intact``), and it was started for the places the caller's environment names now (``caller_env.fingerprint``)
        and by the user and groups the caller is now (``caller_env.credentials``)."""
        return (
            self.owner == os.getpid()
            and self.intact()
            and self.fingerprint == caller_env.fingerprint()
            and self.credentials == caller_env.credentials()
        )

    def close(self) -> None:
        """The service sees its caller's end of file: it stops what it carries and ends."""
        self.gone = True
        wire.let_go(self.sock, self.ident)

    def retire(self) -> None:
        """Let go for good (a spare no longer kept, a service that could not start): closed, its
        service collected (up to ``COLLECT_SECONDS``) when it is this process's, every waiter told."""
        self.close()
        self._ended()

    def retire_if_idle(self) -> None:
        """Retired when no request is open on it (one replaced: the caller's user or places changed),
        judged under the send lock, so a request another thread opened and sends is served on; a
        lock held (a send under way, or a handler interrupting one) means one is: not retired now,
        but once the last request open on it is forgotten (``forget``)."""
        self.replaced = True
        if self.closed_if_idle():
            self._ended()

    def closed_if_idle(self) -> bool:
        """Closed, and True, when no request is open on it, judged under the send lock."""
        if not self._send_lock.acquire(blocking=False):
            return False
        try:
            idle = self.idle
            if idle:
                self.close()
            return idle
        finally:
            self._send_lock.release()

    def __del__(self, finalizing=sys.is_finalizing) -> None:  # replaced, no longer held: its service ends
        if not finalizing() and getattr(self, "ident", None) is not None:  # at exit: the OS closes it
            wire.let_go(self.sock, self.ident)

    def forked(self) -> None:
        """In a forked child: the parent's, and the parent's threads that read it or held its locks are not the
        child's (a new thread may even have the identity of one): gone, nobody reads, no lock held, nobody sleeps;
        its service never waited for here, and a number the caller closed and reused before the fork the child's own."""
        self.gone, self._reading, self._sleeping = True, 0, bells.Bells()
        self._mail, self._send_lock = threading.RLock(), threading.Lock()
        self.process.returncode = 0
        wire.let_go(self.sock, self.ident)

    _live: weakref.WeakSet[Connection] = weakref.WeakSet()  # this process's, each forgotten in a fork's child
    os.register_at_fork(after_in_child=lambda live=_live: [found.forked() for found in live])


at_exit.watch(Connection._live)
