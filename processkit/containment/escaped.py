"""What a run left outside its boundary, ended and said on stderr: ``run``'s and ``batch``'s
after their runs (``cli/run.py``, ``cli/batch.py``), ``bench``'s after each run
(``benchmark/driver.py``): one sweep and one warning, so each names a process the same way."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from .leftovers import Inherited

# What a run's escapee left, why, what it outlived, and what follows (``end_escapees``' words).
LEFT_GROUP = ("process group", " (setsid or setpgid)", "teardown", "; only cgroup containment holds them")
LEFT_CGROUP = ("cgroup", " (it wrote itself into another group's cgroup.procs)", "group's kill", "")
LEFT_EITHER = ("process group or cgroup", " (setsid, setpgid, or a write to cgroup.procs)", "teardown", "")
UNFINISHED = ("", "", "a teardown that could not finish", "")  # no boundary: no cause named


def end_escapees(
    spare: Inherited | None,
    whose: str = "this run",
    its: str = "its",
    left: tuple[str, str, str, str] = LEFT_GROUP,
    raises: bool = False,
    holds: Callable[[int], bool] | None = None,
    own_group: bool = True,
    quiet: bool = False,
) -> list[int]:
    """A run's members that left its boundary outlive its teardown, which reaches the boundary
    alone, while ``cleanup_finished`` counts that boundary (``remaining: 0``): a process-group
    run's ``setsid`` daemon, a cgroup v2 run's process that wrote itself into another group's
    ``cgroup.procs`` (root, or the owner of a delegated subtree). This process is its runs'
    subreaper, so every such process has come to it once orphaned: they are ended here, as
    ``bench`` ends them between runs, and said on stderr (``left``: the boundary left, the kill
    outlived, what follows; no boundary: none named, ``UNFINISHED``), so nothing ends as clean with a process of its own left running:
    under ``--error-format json`` too, before any envelope, as the reference writes its warnings.
    A cgroup v2 run's are looked for in its teardown (``RunContext.escapees``), once the kill of
    its group has orphaned them, and returned, ended or not, for ``cleanup_finished``; a
    process-group run's after the run. ``spare`` (``leftovers.inherited``), their subtrees,
    groups and sessions are the caller's, never a run's: left alone; every other descendant is
    a run's, one that joined this process's own group (``setpgid``) too, unless one of the
    caller's is in that group (``own_group``; ``bench``'s own helpers are there: spared). Where no run made this process a subreaper, nothing of theirs
    came to it: nothing is looked for, not even the one ``waitid``.

    Nothing here may change the exit status (``runner_exit`` says it, or will). A process that
    is another user's now (``sudo -b``) refuses the kill, and any other failure of the sweep is
    an ``OSError``: each said in one warning at most (``raises``: the failure raised instead,
    for the teardown, whose ``read_error`` says it). ``holds``: the teardown's group, whose kill
    is confirmed: one still in it (it cannot die yet, or it left and came back between the
    teardown's read of the group and this look) is killed too and returned, not said to have
    left (``leftovers.Tearing``); one in any other group, named as a run's or not, left.
    ``quiet``: those ended are ended and returned, not said (``bench`` says a benchmark's once)."""
    from . import may_have_escapees

    if not may_have_escapees():
        return []  # the usual end: nothing of ``leftovers`` loaded
    from .leftovers import NOTHING, Tearing, end_descendants
    from ..diagnostics import warn

    boundary, why, outlived, then = left
    refused: list[int] = []
    tearing = None if holds is None else Tearing(holds)
    names: dict[int, str] = {}  # what each one ended was: a CI log names what escaped
    try:
        ended = end_descendants(
            spare=NOTHING if spare is None else spare,
            refused=refused,
            own_group=own_group,
            tearing=tearing,
            names=names,
        )
    except OSError as exc:
        if raises:
            raise
        warn(
            f"cannot look for processes of {whose} left outside {its} containment: {exc.strerror or exc}",
            beside_envelope=True,
        )
        return []
    if ended and not quiet:
        if boundary:
            how = f"had left {its} {boundary}{why}, outside {its} containment, and outlived {its} {outlived}"
        else:
            how = f"outlived {outlived}"
        warn(
            f"{len(ended)} process(es) of {whose} {how}: killed now ({_pids(ended, names)}){then}", beside_envelope=True
        )
    if refused:
        how = f"left {its} {boundary}" if boundary else f"outlived {outlived}"
        warn(
            f"{len(refused)} process(es) of {whose} {how} and now belong to another user, "
            f"who alone may end them ({_pids(refused)}): left running",
            beside_envelope=True,
        )
    return ended + refused + ([] if tearing is None else tearing.met)


def _pids(pids: list[int], names: dict[int, str] | None = None) -> str:
    """``pid 7 sh`` or ``pids 7 sh, 9 sleep``: the first five (``...`` past them), named when ``names``."""
    shown = ", ".join(str(pid) if names is None else f"{pid} {names.get(pid, '?')}" for pid in pids[:5])
    return f"{'pid' if len(pids) == 1 else 'pids'} {shown}{'...' if len(pids) > 5 else ''}"
