"""The open-file limit (``ulimit -n``) of a process that runs many runs at once: its soft limit
raised to the hard one, each child given the caller's soft limit back, and how many runs fit.

Facts that shape it:
- A run in flight holds about a dozen descriptors (its pipes, pidfd, control socket, stream,
  capture files and cgroup handles), so a login's default soft limit (often 1024, or lower
  under a tight ``ulimit -n``) bounds a batch long before the CPUs do; past it each spawn
  fails with EMFILE. The soft limit may be raised up to the hard one by any process, without
  privilege, as most servers do at start.
- The limit is inherited across fork and exec: a child would see the raised limit, and a
  job's environment would differ from the one ``run`` gives it. Lowering a soft limit is
  always permitted, so each child sets the caller's soft limit back just before its exec
  (``child_soft_limit``; both spawn paths, processkit/engine/spawn_popen.py and csrc/spawn.c).
- Raising one past the hard limit is not: a hard limit lowered while the process runs (``prlimit
  --pid``, which any of its children may do to it) leaves every later child the lower one. That is
  said once, in a warning, rather than met silently by a child.
"""

from __future__ import annotations

import errno
import os

from .errors import Failure, Kind, internal_failure

# What one job in flight holds open (12 counted on this host, and the 29 files its host's pool
# holds for each set of lent cgroups (containment/pool.py: each group's join fd, a path fd on a v1
# group's directory and the files read of it, its as-made settings among them; a v2 group 9,
# memory 11, pids 6, cpuacct 3), with a margin), and what the process keeps for itself besides
# (the summary, the index's pipe, the loop, a job's short-lived opens, the pool's one set
# started again ahead for the next job and its fd on each parent group).
DESCRIPTORS_PER_JOB = 44
DESCRIPTORS_KEPT = 64
# What the API's runner service keeps for itself besides its runs: its socket and a frame's
# descriptors in flight, the loop, its lodging, its scratch directory, a reply's read-back.
SERVICE_KEPT = 16
# Beyond what the service itself holds open however long it has run (its interpreter's,
# its lodging's, the pool's parents): below a limit this far above its runs' share, the
# descriptors open now are counted before each run; above it they cannot reach the limit.
SURELY_KEPT = 512
# The most a service's pool may keep open for its idle groups (``leave_room_for_idle_groups``):
# past what one keeps at its bound (containment/pool.py: 64 idle groups a parent, 10 files each).
IDLE_MOST = 1024

# What one run may hold open at once with every option (28 counted on this host: its pipes,
# pidfd, stream, capture files, --stdin-file, control socket, registry entry, cgroup handles and
# the modules the interpreter reads meanwhile), with a margin: below it a run fails at whichever
# open comes first, an import among them (``start_with_room``).
RUN_LEAST = 48

_caller_soft: list[int] = []  # the soft limit the process was started with, once raised
_held: list[int] = []  # the soft limit this process last set or started with (``exhausted``)
_lowered: list[int] = []  # the hard limit ``child_soft_limit`` first found below the caller's soft one, said then
_spare: list[int] = []  # what the last ``runs_that_fit`` left beyond the runs it let in flight


def raise_soft_limit() -> None:
    """Raise this process's soft open-file limit to its hard one (once); its children get the
    caller's soft limit back (``child_soft_limit``). A refusal leaves the limit as it was."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:  # nothing to raise (the API's service, usually): still the limit held
        _held[:] = [hard]
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (OSError, ValueError):  # a hard limit past the kernel's fs.nr_open: left as it is
        return
    _held[:] = [hard]
    if not _caller_soft:  # raised before (``start_with_room``): the caller's is the one kept
        _caller_soft.append(soft)


def start_with_room(runs: bool) -> str | None:
    """Make sure this process may hold what one run needs (``RUN_LEAST``), before it loads the
    command's modules: a soft limit below it (``ulimit -n 12``) is raised to it where the hard
    one allows, its children given the caller's back (``child_soft_limit``); else, for a command
    that ``runs`` something, the one-line reason naming the limit (one that only reads or asks,
    ``probe``, ``list``, ``doctor``, goes on with what the hard limit allows). Without it the
    first open past the limit failed wherever it fell, a module's import as often as a run's own
    file, as an internal error. ``sysconf`` reads the soft limit with one ``getrlimit`` and no
    import: ``resource`` loads only when it is low."""
    soft = os.sysconf("SC_OPEN_MAX")
    _held[:] = [soft] if soft >= 0 else []
    if soft < 0 or soft >= RUN_LEAST:  # -1: no limit
        return None
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < RUN_LEAST:
        if runs:
            return (
                f"the open-file limit (ulimit -n: {soft}, hard limit {hard}) is below the {RUN_LEAST} "
                "files a run may need; raise the limit"
            )
        raised = hard
    else:
        raised = RUN_LEAST
    if raised > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        _held[:] = [raised]
        if not _caller_soft:
            _caller_soft.append(soft)
    return None


def too_low_for_the_service() -> Failure | None:
    """Why the API's runner service cannot serve under its open-file limit (its soft one, raised
    to the hard one: ``raise_soft_limit``), asked before it opens anything of its own: below
    ``SERVICE_KEPT`` it cannot hold its own files, and it ended at whichever import came first
    after its hello, every call raising ``ServiceGone`` naming no limit. None when it can."""
    soft = soft_limit()
    if soft is None or soft >= SERVICE_KEPT:
        return None
    return Failure(
        Kind.SETUP,
        f"the open-file limit (ulimit -n: {soft}) is below the {SERVICE_KEPT} files the runner service "
        "keeps for itself; raise the limit",
    )


def child_soft_limit() -> int | None:
    """The soft open-file limit a child must be given back before its exec, or None when this
    process runs with the one it was started with. No soft limit may pass the hard one: once this
    process's hard limit was lowered below the caller's soft one (``prlimit`` on the runner, by
    one of its own children too), each child gets that hard limit instead, said once."""
    if not _caller_soft:
        return None
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY or hard >= _caller_soft[0]:
        return _caller_soft[0]
    if not _lowered:
        from .diagnostics import warn

        _lowered.append(hard)
        warn(
            f"children now run with an open-file limit (ulimit -n) of {hard}, below the caller's "
            f"{_caller_soft[0]}: this process's hard limit was lowered to {hard} since it started"
        )
    return hard


def spare_descriptors() -> int:
    """The descriptors the last ``runs_that_fit`` found left beyond the runs it let in flight
    (0 before it was asked): what a lodged host's pool may hold for its idle groups."""
    return _spare[-1] if _spare else 0


def soft_limit() -> int | None:
    """This process's soft open-file limit; None when it has none. Read by ``sysconf`` (one
    ``getrlimit``, -1 for none), never by a module's import: the words for ``EMFILE``
    (``exhausted``) are made where no file can be opened, an import's neither."""
    soft = os.sysconf("SC_OPEN_MAX")
    return None if soft < 0 else soft


def _open_now() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def leave_room_for_idle_groups(soft: int | None) -> None:
    """A process that admits its runs one at a time against its limit ``soft`` (the API's runner
    service, ``no_room_for_a_run``) leaves a quarter of what it does not surely keep, at most
    ``IDLE_MOST``, for its pool's idle groups' files (``spare_descriptors``): a group started
    again is then a few ``pread``s, not a dozen ``open``s and ``close``s a run. The admission
    counts that room as kept, so it holds beside the runs in flight as before."""
    room = (1 << 20) if soft is None else (soft - SURELY_KEPT) // 4
    _spare[:] = [max(0, min(room, IDLE_MOST))]


def no_room_for_a_run(in_flight: int, soft: int | None, unopened: int = 0) -> str | None:
    """Why one more run does not fit beside what this process holds open now (its ``in_flight``
    runs' descriptors among them, and the room its pool may keep, ``spare_descriptors``), in
    one line naming the limit ``soft`` (``soft_limit``, read once by the service: a process's
    own limit moves only when it sets it); None when it fits. ``unopened``: runs of those in
    flight that have opened nothing yet (admitted in the same pass, none begun: a burst of
    calls), each counted as the run it will be. The runner service asks before each run: a call
    that does not fit fails alone, never the program it names (``EMFILE`` at its spawn) nor
    every run in flight."""
    if soft is None or soft >= (in_flight + 1) * DESCRIPTORS_PER_JOB * 2 + SURELY_KEPT + spare_descriptors():
        return None  # far from the limit: not worth listing what is open (most calls, once raised)
    open_now = _open_now()
    if soft - open_now - SERVICE_KEPT >= DESCRIPTORS_PER_JOB * (1 + unopened):
        return None
    return (
        f"the runner service's open-file limit (ulimit -n: {soft}) leaves no room for another run "
        f"beside the {in_flight} in flight ({open_now} files open, about {DESCRIPTORS_PER_JOB} more needed): "
        "raise the limit, or start it once a run has ended"
    )


def exhausted(what: str) -> str:
    """The one-line message for ``EMFILE``/``ENFILE`` met while ``what``: the limit named, not
    the program or the file the open was for. A limit lower than the one this process set or
    started with was lowered under it by another process (a child's ``prlimit --pid $PPID``):
    said so, since raising the caller's ``ulimit -n`` would not help."""
    soft = soft_limit()
    limit = "unlimited" if soft is None else str(soft)
    if soft is not None and _held and soft < _held[0]:
        return (
            f"no descriptor left {what}: the open-file limit (ulimit -n: {limit}) is reached, lowered from "
            f"{_held[0]} by another process (prlimit) while this one ran"
        )
    return f"no descriptor left {what}: the open-file limit (ulimit -n: {limit}) is reached; raise the limit"


def out_of_descriptors(what: str) -> Failure:
    """``EMFILE``/``ENFILE`` met while ``what``: the set-up failure (111) that names the limit."""
    return Failure(Kind.SETUP, exhausted(what))


def unexpected(exc: BaseException, what: str) -> Failure:
    """The mapping of an exception nothing expected (a bug; the open-file limit met by an open
    no step named): out of descriptors (``EMFILE``, ``ENFILE``) is the set-up failure it is, met
    while ``what`` (``exhausted``); anything else the runner's own failure, ``internal error:
    <type>: <text>``. The CLI's last resort, the runner service's (a run's set-up, a frame it
    took, a reply it made) and a control reply's alike. A run's once its steps began (a phase's,
    a callback's, its release's) keeps these words but not the code: that run ends as the
    runner's failure whatever raised, an ``EMFILE`` too (``runner_exit{internal, 104}``:
    ``endings.faulted``)."""
    if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
        return out_of_descriptors(what)
    return internal_failure(f"{type(exc).__name__}: {exc}")


def runs_that_fit(requested: int, say: bool = True) -> int:
    """How many runs may be in flight at once: ``requested``, unless the open-file limit leaves
    room for fewer (then as many as fit, said once in a warning unless not ``say``: ``--jobs 0``
    asked for as many as fit). When not even one fits, a
    setup Failure: every job would fail to spawn. What is left beyond them is kept for
    ``spare_descriptors``."""
    import resource

    from .diagnostics import warn

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    _spare[:] = [0]
    if soft == resource.RLIM_INFINITY:
        _spare[:] = [1 << 20]
        return requested
    open_now = _open_now()
    room = (soft - open_now - DESCRIPTORS_KEPT) // DESCRIPTORS_PER_JOB
    if room < 1:
        raise Failure(
            Kind.SETUP,
            f"the open-file limit (ulimit -n: {soft}) leaves no room for a job: "
            f"one needs about {DESCRIPTORS_PER_JOB} files beside the {DESCRIPTORS_KEPT + open_now} "
            "the batch keeps; raise the limit",
        )
    if room >= requested:
        _spare[:] = [soft - open_now - DESCRIPTORS_KEPT - requested * DESCRIPTORS_PER_JOB]
        return requested
    if say:
        warn(
            f"{requested} jobs at once would need more open files than this process may have "
            f"(ulimit -n: {soft}): running {room} at once; raise the limit for more"
        )
    return room
