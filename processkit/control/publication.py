"""Publishing a run: its registry record and its control socket (docs/control-plane.md §1, §2.2).

Both are best effort: a failure is one warning and the child runs anyway (docs/run.md §1.3 step 7).
The record is written before the child is spawned (a run whose context sets ``publish_after_ms``:
once its child has run that long), and ``close()`` removes record, lock and socket at every
ending the runner lives to see.
"""

from __future__ import annotations

import os

from ..errors import os_error_words
from ..events.argv import described
from ..events.emitter import utc_timestamp
from ..rundir import JobSlot, RunDir
from ..registry.location import RegistryError, open_for_writing
from ..registry.records import Record
from ..plain import Plain
from ..registry.registration import Registration
from .server import ControlServer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from ..containment.accounting import Usage
    from ..containment.members import Member
    from ..loop import Loop
    from .lodging import JobRecord, Lodging


NOT_REGISTERED = "could not create the run registry entry"  # the reference's words, wherever it failed


class PublishedRun(Plain):
    """All the control plane may know of a run: what the record shows, and the three
    questions a client may put to the live run. The runner builds it; nothing else is reached."""

    __slots__ = (
        "loop",
        "run_id",
        "argv",
        "labels",
        "jsonl",
        "capture_dir",
        "cwd",
        "mechanism",
        "rundir",
        "root_pid",
        "members",
        "holds",
        "stop",
        "usage",
        "lodging",
        "jsonl_held",
    )

    def __init__(
        self,
        *,
        loop: Loop,
        run_id: str,
        argv: tuple[str, ...],
        labels: tuple[tuple[str, str], ...],
        jsonl: str,
        capture_dir: str | None,
        cwd: str,
        mechanism: str,
        rundir: RunDir | None,
        root_pid: Callable[[], int | None],
        members: Callable[[], list[Member]],
        stop: Callable[[str], None],
        holds: Callable[[int], bool],
        usage: Callable[[], Usage] | None = None,
        lodging: Lodging | None = None,
        jsonl_held: bool = False,
    ):
        self.loop = loop  # the runner's loop, which serves the control socket
        self.run_id = run_id
        self.argv = argv
        self.labels = labels
        self.jsonl = jsonl
        self.capture_dir = capture_dir
        self.cwd = cwd  # the runner's, against which the two paths above are made absolute
        self.mechanism = mechanism
        self.rundir = rundir  # holds the control socket; None when it could not be made
        self.root_pid = root_pid  # None until the child is spawned
        self.members = members  # raises OSError when they cannot be read
        self.holds = holds  # whether a pid is a member now; raises OSError when that cannot be read
        self.stop = stop  # a cancel or kill, requested once its ack is written
        self.usage = usage  # the container's accounting so far (the ``usage`` extension)
        self.lodging = lodging  # a batch job's: its batch's directory, where its record goes
        self.jsonl_held = jsonl_held  # another run holds ``jsonl``: the record says so (``Record.stream``)


def publish(run: PublishedRun, warn: Callable[[str], None], started_ns: int | None = None) -> Publication | None:
    """The run's record and socket (``started_ns``: its start on the wall clock, else now), or
    None with a warning where the registry cannot take it (another user's or a shared directory
    included: the child runs, unregistered, as the reference's §2.1 says)."""
    registration = _registration(run, warn)
    if registration is None:
        return None
    publication = Publication(run, registration, started_ns)
    if run.rundir is None:
        warn("could not open the control transport: the run has no run directory")  # the reference's words
    else:
        try:
            publication.server = ControlServer(
                run.loop, publication.respond, run.rundir.socket_path, member=publication.holds
            )
        except OSError as exc:
            warn(f"could not open the control transport: {os_error_words(exc)}")
    try:
        registration.write(publication.record())
    except RegistryError as exc:
        warn(f"{NOT_REGISTERED}: {exc}")
        publication.close()
        return None
    return publication


def _registration(run: PublishedRun, warn: Callable[[str], None]) -> Registration | JobRecord | None:
    """The run's entry reserved (its lock held), or None with a warning in the reference's
    words: the registry refused (either cause: a batch's refusal is its registry's), or the
    entry's lock could not be made in it (the reference reserves the lock in ``register``)."""
    try:
        if run.lodging is not None and isinstance(run.rundir, JobSlot):
            return run.lodging.register(run.rundir)
        directory = open_for_writing()
    except RegistryError as exc:
        warn(f"could not open the run registry: {exc}")
        return None
    try:
        return Registration(directory)
    except RegistryError as exc:
        warn(f"{NOT_REGISTERED}: {exc}")
        return None


class Publication:
    """What a run shows the control plane, and the answers its socket gives."""

    def __init__(self, run: PublishedRun, registration: Registration | JobRecord, started_ns: int | None = None):
        self._run = run
        self._registration = registration
        self.server: ControlServer | None = None
        self.started_at = utc_timestamp(started_ns)
        self.jsonl = self._absolute(run.jsonl)
        self.capture_dir = self._absolute(run.capture_dir)

    def _absolute(self, path: str | None) -> str | None:
        return None if path is None else os.path.normpath(os.path.join(self._run.cwd, path))

    def record(self) -> Record:
        run = self._run
        _, sha256, found = described(run.argv)
        return Record(
            run_id=run.run_id,
            endpoint=self.server.path if self.server is not None else None,
            started_at=self.started_at,
            argv_sha256=sha256,
            hint=found,
            labels=dict(run.labels),
            jsonl=self.jsonl,
            capture_dir=self.capture_dir,
            lock_file=self._registration.lock_name,
            jsonl_held=run.jsonl_held,
        )

    def respond(self, verb: str, peer_pid: int | None):
        """The reply to ``verb`` and, for cancel/kill, the stop to request once it is written.
        (The wire's module is imported here, as by the connection asking: most runs never answer.)"""
        from . import protocol

        run = self._run
        if verb == "inspect":
            return self._snapshot(), None
        if verb == "attest":
            return self._attestation(peer_pid), None
        if verb == "usage":
            return self._usage(), None
        return protocol.ack(verb, run.run_id), lambda: run.stop(verb)

    def holds(self, pid: int | None) -> bool:
        """Whether the connecting process ``pid`` is one of the run's own; not when unknown. One
        gone already is counted as the run's: a real client is alive while it waits for its reply,
        and a member could otherwise connect from a child that exits at once, outside its share."""
        if pid is None:
            return False
        try:
            return self._run.holds(pid)
        except (ProcessLookupError, FileNotFoundError):
            return True
        except OSError:
            return False

    def _snapshot(self) -> dict:
        from . import protocol

        run = self._run
        try:
            members = [member.as_event() for member in run.members()]
        except OSError:
            members = []
        return {
            "snapshot_version": protocol.SNAPSHOT_VERSION,
            "run_id": run.run_id,
            "mechanism": run.mechanism,
            "root_pid": run.root_pid(),
            "started_at": self.started_at,
            "jsonl": self.jsonl,
            "capture_dir": self.capture_dir,
            "members": members,
        }

    def _usage(self) -> dict:
        from . import protocol

        run = self._run
        if run.usage is None:
            return protocol.error("this runner does not account its runs")
        return {"usage_version": protocol.USAGE_VERSION, "run_id": run.run_id, **run.usage().as_json()}

    def _attestation(self, peer_pid: int | None) -> dict:
        """Whether the connecting process is inside this run's container, by the kernel's pid."""
        from . import protocol

        run = self._run
        if peer_pid is None:
            verdict = "peer_identity_unsupported"
        else:
            try:
                member_pids = {member.pid for member in run.members()}
            except OSError as exc:
                return protocol.error(f"cannot read the run's members: {exc.strerror or exc}")
            verdict = "member" if peer_pid in member_pids else "not_a_member"
        return {
            "attestation_version": protocol.ATTESTATION_VERSION,
            "run_id": run.run_id,
            "verdict": verdict,
            "peer_pid": peer_pid,
            "mechanism": run.mechanism,
            "checked_at": utc_timestamp(),
        }

    def close(self, ended: tuple[int, str, int | None] | None = None) -> None:
        """Unregister (record, then lock), then remove the socket. Idempotent. ``ended``: the
        run's ``runner_exit`` code, source and child_code, remembered for a later ``wait``.
        The server is forgotten as it is closed: it answers through ``respond``, a cycle that
        would leave a published run's objects to the cyclic garbage collector."""
        self._registration.close(ended)
        server, self.server = self.server, None
        if server is not None:
            server.close()
