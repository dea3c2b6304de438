"""A run's context: what a run takes from whoever carries it (the CLI's ``run``, a batch,
``bench``, the API's runner service) rather than from its description (``spec.RunSpec``), handed
to the engine beside the spec. Apart from the spec, which describes the run and is checked by
the grammar, this is the carrier's wiring: descriptors, places, the caller's process state.
"""

from __future__ import annotations

from .plain import Plain

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


class RunContext(Plain):
    """What a run takes from whoever carries it rather than from its description: captured
    when the call is made, or wired in by the carrier (the CLI's ``run``, a batch, ``bench``, the
    API's runner service), and handed to the engine beside the ``RunSpec``, which holds only what
    describes the run (a carrier never sets its wiring there). Never read from the process-wide state of the process
    that carries the run (``os.environ``, fds 0-2, the umask), which a long-lived carrier (the API's runner
    service) shares between the runs of many calls. Descriptors here are the carrier's to close,
    except ``held_fds`` (unless ``held_lent``) and ``ready_fd``, which the engine closes as it
    would its own files.

    - ``env``: the environment the child's is derived from (``EnvPlan`` applied to it); None:
      this process's own ``os.environ`` (``run``, ``batch``, ``bench``).
    - ``limits``: the caller's resource limits that differ from this process's, (kind, soft,
      hard) each, which the child sets before its exec (``rlimits``); None: it inherits them.
    - ``umask``: the caller's, which the child and the files at the paths the spec names take
      (``engine.callers_umask``); None: this process's own.
    - ``stdio``: the descriptors standing for the caller's stdin, stdout and stderr, in that
      order, each an open fd of this process; None: this process's own 0, 1 and 2. They are
      what a child inherits (``inherit_stdio``, ``StdinMode.INHERIT``, the fds a spawn does not
      pipe), where the echo writes, and the terminal a ``--pty`` run's keys, size and
      foreground come from.
    - ``ready_fd``: a detached copy's pipe to its launcher (``cli/detach.py``), told once the
      child started and closed then; None for every other run.
    - ``held_fds``: a batch's ``--keep failed``: (stream, stdout, stderr) memfds the engine
      writes and closes instead of opening the spec's ``jsonl`` and ``capture_dir`` files
      (which it still names); head capture only. ``(stream,)`` alone holds the stream only (the
      API's runner service for a run with no capture, or one captured into files).
    - ``held_lent``: the ``held_fds`` stay the carrier's: the engine writes them and never closes
      them (a batch's memfds serve its next attempt as they are, not through copies the engine
      closes: six system calls a job). The carrier takes them back only once the run's steps
      are over, when nothing of the run writes them any more.
    - ``cwd``: the carrier's working directory as it read it once for every run it carries (a
      batch or a bench session, at its start: ``carrier_cwd``); None: the engine reads this
      process's at each run.
    - ``publish_after_ms``: None: the record and socket are made before the spawn (the
      reference's order); else only once the child has run this long (a bench's run, a
      ``--keep failed`` job: streams no client can read, and runs most of which end sooner, so
      they pay for no publication).
    - ``output_fd``: the child's stdout in place of a pipe, its stderr /dev/null (``bench
      --output``).
    - ``child_fds``: the API's subprocess-shaped streams (``stdin=PIPE``, ``stdout=`` a file, a
      descriptor or a pipe the caller reads): per standard stream, a descriptor the child gets
      as it is, in place of the runner's pipe or /dev/null (None: the stream as the spec says);
      the child's copies are the spawn's.
    - ``linger_ms``: not 0: once the native spawn's child has exec'd, how long the spawn waits
      at most for its exit before the run goes on (``bench``'s runs: a command shorter than this
      has the CPU to itself, as a child of hyperfine's blocking ``wait4`` does). A run's, as
      every other part of its context: no process-wide setting another run could see.
    - ``captured``: a list of the carrier's that the engine fills, once it opened the run's
      capture files (``capture_dir``), with a descriptor to read each (stdout's, then
      stderr's; ``readback.NO_FILE`` for one that is no regular file or got no descriptor,
      ``readback.UNREADABLE`` for a file of the caller's this user may not read), on the same
      file as the engine's own, so the carrier reads back the bytes the run captured even
      after the child put another file at the path (the API's runner service). The carrier
      closes them. Files made for it are opened read-write, so a mode the caller's umask left
      unreadable refuses no read-back.
    - ``streamed``: the same for the run's named stream file (``jsonl``): one descriptor.
    - ``places``: where the carrier put what the spec names by a stand-in (the API's runner
      service: ``api.wire``'s ``SCRATCH_*`` for a ``jsonl``, ``capture_dir`` or ``stdin_file``
      in its memory or scratch directory), stand-in to path; ``place`` reads a spec's path
      through it.
    - ``passed_fds``: the caller's descriptors from 3 up the child keeps as they are (the CLI's:
      ``caller_fds``, a make's jobserver pipe among them), ascending; (): none, every fd but the
      child's 0-2 closed in it (the API's runner service, whose own and other calls'
      descriptors no child may hold).
    - ``escapees``: the carrier's look, once a cgroup v2 run's group is killed, for the run's
      processes that left the group (a write of its pid into another group's ``cgroup.procs``)
      and so outlived the kill: it ends and says them, and returns their pids, which
      ``cleanup_finished`` lists as remaining (given the group's ``holds``: one still in it is
      ended and returned, not said to have left). Only a carrier that can tell them from anyone
      else's gives one (the CLI's ``run``, the one run of its process, a subreaper); None: not
      looked for here.
    - ``stream_guarded``: the carrier guards the stream's file itself (a batch's job stream, in
      the ``--out`` it holds alone, where a Dask task run again may meet its first run's): the
      engine takes no lock of its own on it (``emitter.open_stream``'s one stream, one run), nor
      on the job's capture files beside it (``capture.open_targets``).
    - ``held_stream_skipped``: a ``--jsonl`` file another run holds (``emitter.open_stream``'s
      lock) leaves the run without a stream instead of refusing it: one warning, its events
      written nowhere, its record naming the file all the same (``engine.runner``), as the reference's run
      whose stream stopped goes on. The CLI's own foreground run; not a carrier that reads the
      run back from its stream (``run --detach``'s copy, whose launcher waits for its
      ``run_started`` there; the API's service, whose result is the stream's).
    - ``exit_drain_seconds``: how long the child's pipes a descendant holds past the child's
      exit are read before that exit ends the run; None: the reference's 5 s
      (``engine.race.EXIT_DRAIN_SECONDS``: ``run``, the API); a batch's jobs: nextest's leak
      bound (``batching.limits.LEAK_TIMEOUT_SECONDS``).
    """

    __slots__ = (
        "env",
        "stdio",
        "ready_fd",
        "held_fds",
        "held_lent",
        "publish_after_ms",
        "output_fd",
        "child_fds",
        "places",
        "linger_ms",
        "cwd",
        "captured",
        "streamed",
        "passed_fds",
        "escapees",
        "umask",
        "limits",
        "stream_guarded",
        "held_stream_skipped",
        "exit_drain_seconds",
    )

    def __init__(
        self,
        *,
        env: dict[str, str] | None = None,
        stdio: tuple[int, int, int] | None = None,
        ready_fd: int | None = None,
        held_fds: tuple[int, ...] | None = None,
        held_lent: bool = False,
        publish_after_ms: int | None = None,
        output_fd: int | None = None,
        child_fds: tuple[int | None, int | None, int | None] | None = None,
        places: dict[str, str] | None = None,
        linger_ms: int = 0,
        cwd: str | None = None,
        captured: list[int] | None = None,
        streamed: list[int] | None = None,
        passed_fds: tuple[int, ...] = (),
        escapees: Callable[[Callable[[int], bool]], list[int]] | None = None,
        umask: int | None = None,
        limits: tuple[tuple[int, int, int], ...] | None = None,
        stream_guarded: bool = False,
        held_stream_skipped: bool = False,
        exit_drain_seconds: float | None = None,
    ):
        self.env = env
        self.stdio = stdio
        self.ready_fd = ready_fd
        self.held_fds = held_fds
        self.held_lent = held_lent
        self.publish_after_ms = publish_after_ms
        self.output_fd = output_fd
        self.child_fds = child_fds
        self.places = places
        self.linger_ms = linger_ms
        self.cwd = cwd
        self.captured = captured
        self.streamed = streamed
        self.passed_fds = passed_fds
        self.escapees = escapees
        self.umask = umask
        self.limits = limits
        self.stream_guarded = stream_guarded
        self.held_stream_skipped = held_stream_skipped
        self.exit_drain_seconds = exit_drain_seconds

    def fd(self, index: int) -> int:
        """The descriptor standing for the caller's ``index`` (0, 1 or 2)."""
        return index if self.stdio is None else self.stdio[index]

    def place(self, path: str) -> str:
        """``path`` (a spec's ``jsonl``, ``capture_dir`` or ``stdin_file``) where this run has
        it: the carrier's own place for a stand-in, else ``path`` itself."""
        return path if self.places is None else self.places.get(path, path)


OWN_CONTEXT = RunContext()  # a run carried in the process that asked for it
