"""A run from setup to ``runner_exit``: the phases in order, and the final report.

``launch`` sets up and spawns and returns what it launched, ``race`` waits until an ending wins,
``endings`` says what that ending reports, ``teardown`` stops the tree, and ``release`` gives back
whatever the run made, in one place whatever step it reached or whatever raised. A phase that
raises is the runner's own failure: the tree is killed first (``salvage``), and ``runner_exit``
still ends the stream. A release step that fails leaves the others running and makes the run the
runner's failure too; a release that raises as a whole is followed by the last resort's. A
``KeyboardInterrupt`` (any exception not an ``Exception``) inside a step ends the run the same
way, and is handed to the host, which stops the other runs and raises it at the end. A run is
a generator of waits (``steps``) that a ``Host`` carries on its loop; ``execute`` is the host
carrying one run, as ``run`` does, and ``batch`` carries many side by side.
"""

from __future__ import annotations

import os

from ..containment.accounting import stream_summary
from ..containment.members import dying
from ..diagnostics import warn_once
from ..errors import Failure, Kind, setup_failure
from ..events.emitter import STALL_SECONDS, Emitter
from ..events.base import ResourceSummary, RunnerExit  # the rarer types load where written (events/base.py)
from ..context import OWN_CONTEXT, RunContext
from ..native import Held
from ..registry.stream_guard import StreamKey
from ..spec import RunSpec
from . import launch, spawn
from .callers_umask import made
from .endings import ENDING_REPORTS, Ending, EndingFacts, EndingKind, Outcome, fault_words, faulted, internal
from .host import Host
from .race import race
from .state import Launched, RunState
from .teardown import drain_outputs, release, teardown
from .tree_end import figures, read_tree
from .waits import wait_until

# Seconds between looks at a stream's backlog while the ended run waits for its reader. The
# emitter watches the pipe for room on the run's loop, which wakes the run whenever its reader
# takes some: the look only has to notice a reader that took nothing for STALL_SECONDS.
BACKLOG_POLL = STALL_SECONDS / 4

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


def execute(
    spec: RunSpec, context: RunContext = OWN_CONTEXT, remember: tuple[str, ...] = (), leaks: bool = False
) -> Outcome:
    """Run ``spec`` to completion in a host of its own. Never raises for anything the run
    itself can report. ``remember``, ``leaks``: as ``steps``'s."""
    host = Host()
    host.alone = True
    try:
        outcome = host.carry(steps(host, spec, remember, context=context, leaks=leaks))
    finally:
        host.close()
    assert isinstance(outcome, Outcome)
    return outcome


def steps(
    host: Host,
    spec: RunSpec,
    remember: tuple[str, ...] = (),
    final_usage: bool = True,
    keep_stream: Callable[[Outcome], bool] | None = None,
    context: RunContext = OWN_CONTEXT,
    records: bool = False,
    leaks: bool = False,
):
    """One run on ``host``'s loop, as a generator of waits; returns its Outcome, whose ``remembered``
    holds the last event of each type in ``remember`` that reached the stream (the object written). Without
    ``final_usage`` the Outcome's ``usage`` is the whole tree's figures at the stream's
    ``resource_summary`` read point, not read again once the tree is gone (a batch's lines).
    ``keep_stream``: for a stream held in memory (``RunContext.held_fds``), whether the ended run's is written at all
    (with ``records``, the Outcome carries its events as gathered, ``Outcome.records``, unless it
    spilled: made only for a carrier that asks, as a dropped stream's are otherwise never made).
    ``context``: what the carrier wires in beside the spec (``context.RunContext``): the caller's
    environment and standard streams when the run is not this process's own, held memfds, late
    publication, descriptors and places for the child's streams. ``leaks``: the Outcome's
    ``left_behind`` is counted (a ``/proc/<pid>/status`` read per member the root left
    running), for the carrier that reads it (``batch``'s LEAK, ``run``'s warning); 0 otherwise."""
    held = context.held_fds  # the engine's to close, as the files it opens, unless lent
    try:
        runner_cwd = context.cwd if context.cwd is not None else os.getcwd()
    except OSError as exc:
        for fd in () if context.held_lent else held or ():
            os.close(fd)
        return Outcome(Kind.SETUP.code, setup_failure("could not resolve the runner's current directory", exc))
    jsonl = context.place(spec.jsonl)
    loop = host.run_loop()  # the stream's too: a deferred one's pipe is watched on it for room
    unsaid = None  # the warning of a run without its stream, said once its setup has passed
    try:
        emitter = made(  # a stream the caller named: made under its umask (``callers_umask``)
            context,
            spec.jsonl,
            Emitter,
            jsonl,
            remember,
            held[0] if held else None,
            lent=context.held_lent,
            locked=not context.stream_guarded,
            key=None if context.stream_guarded else StreamKey(),
            defer=None if host.alone else loop,
            readable=context.streamed is not None,
            said=host.said,
        )
    except OSError as exc:
        refused = setup_failure(f"could not open the JSONL events file `{jsonl}`", exc)
        if not (isinstance(exc, Held) and context.held_stream_skipped):
            return Outcome(Kind.SETUP.code, refused)
        emitter = _without_stream(remember)
        unsaid = f"JSONL event logging disabled: {refused.message}; this run's events are not written"
    run = RunState(
        spec,
        emitter,
        runner_cwd,
        loop,
        host.reaper,
        context,
        final_usage=final_usage,
        count_leaks=leaks,
        said=host.said,
    )
    host.enlist(run)  # a run that begins after a stop signal starts no child
    outcome = None
    try:
        outcome = yield from _phases(host, run, unsaid)
        host.delist(run)  # its outcome decided: no stop, Ctrl-Z or fault of a callback is its now
        # A pipe's reader behind the stream (``Emitter.defer``): waited for on the loop, the
        # host's other runs going on, until it took the rest or counts as stalled.
        yield from wait_until(emitter.drained, poll=BACKLOG_POLL)
        outcome.remembered = emitter.remembered
        outcome.stream_bytes = emitter.sent
        outcome.stream_file = emitter.identity
        outcome.stream_failure = emitter.failure
        outcome.echo_lost = run.echo_lost
        if context.streamed is not None:  # the carrier reads the stream back through it (``RunContext``)
            context.streamed.append(emitter.reader())
        if records:
            outcome.records = emitter.gathered  # a held stream's events, unencoded (None once written)
        return outcome
    finally:
        host.delist(run)
        emitter.close(keep=outcome is None or keep_stream is None or keep_stream(outcome))


def _without_stream(remember: tuple[str, ...]) -> Emitter:
    """The stream of a run whose ``--jsonl`` another run holds (``RunContext.held_stream_skipped``):
    one warning, as the reference says a stream whose writes stopped, and the run goes on. The
    warning waits for the run's setup to pass (``_phases``): a later step that refuses the run (a
    capture another run holds, 111) says its own line alone, as the run never went on. Its events
    are still made, for what the run says of them itself (a capture cut, ``remember``), and
    written nowhere (``os.devnull``): never into the file, which holds the other run's. Its record
    still names the file, as the reference's does, and says it is not its stream
    (``Record.jsonl_held``): the file's head may name this very run id (two runs started with the
    same flags), and its readers showed the other run's events as this one's. It keeps a registry
    key all the same: a capture file another run writes unlocked (a read lock in the way) is that
    run's key's, and refuses this run as the stream's own open would."""
    emitter = Emitter(os.devnull, remember, key=StreamKey())
    emitter.withheld = True
    return emitter


def _phases(host: Host, run: RunState, unsaid: str | None):
    """The run's phases; ``unsaid``: the warning of a run without its stream (``_without_stream``)."""
    launched: Launched | None = None
    outcome: Outcome | None = None
    try:
        try:
            launch.prepare(host, run)
            if unsaid is not None:  # its setup passed: from here the run goes on, said in JSON mode too
                warn_once(host.said, unsaid, beside_envelope=True)
            launched = yield from launch.start(host, run)
        except Failure as failure:
            outcome = Outcome(failure.code, failure)
        except spawn.AttachError as exc:
            from ..events.types import ContainerFailed

            run.events.emit(ContainerFailed(phase="attach", code=Kind.CONTAINER_ERROR.code, message=str(exc)))
            outcome = Outcome(Kind.CONTAINER_ERROR.code, Failure(Kind.CONTAINER_ERROR, str(exc)))
        if launched is not None:  # the child exists and is reported: from here it ends through the teardown
            ending = None if launched.handoff is None else Ending(EndingKind.FOREGROUND, launched.handoff)
            try:
                launch.connect(run, launched)
                if launched.keyboard is not None or "keys" in run.timers:  # one it has, or may take
                    host.watch_continue(run, run.loop.waking(launched.keys_again))  # a fault: the run's own
                if ending is None:
                    ending = yield from race(run, launched)
            except Exception as exc:  # noqa: BLE001 - a bug must still end the tree and the stream
                ending = Ending(EndingKind.INTERNAL, fault_words(exc))
            outcome = yield from _finish(run, launched, ending)
    except GeneratorExit:  # closed from outside (``carry_all``'s finally): no step may yield now
        raise
    except BaseException as exc:  # noqa: BLE001 - a bug, or a KeyboardInterrupt inside a step: killed, released, reported
        from .salvage import killed

        if not isinstance(exc, Exception):
            host.interrupted(exc)  # the host stops the other runs, and raises it once all have ended
        outcome = yield from killed(run, launched, exc)
    finally:
        host.unwatch(run)  # before the keyboard's release: no SIGCONT takes raw mode back after it
        outcome = _release(run, launched, outcome)
    code, source, child_code = outcome.exit_fields()
    if run.events.writing:
        run.events.emit(RunnerExit(code=code, source=source, child_code=child_code))
    if launched is not None:
        outcome.started_ns, outcome.ended_ns = launched.started_ns, launched.ended_ns
        outcome.max_rss_bytes, outcome.root_cpu_ns = launched.child.max_rss_bytes, launched.child.root_cpu_ns
        outcome.command_from_ns = launched.child.command_from_ns
    return outcome


ABANDONED = (Kind.INTERNAL.code, Kind.INTERNAL.label, None)  # a run closed from outside (``carry_all``'s finally)


def _release(run: RunState, launched: Launched | None, outcome: Outcome | None) -> Outcome:
    """The run's one release. A step that failed (warned there) makes the run the runner's own
    failure, as does a release that raised, which the last resort follows with its own."""
    try:
        problem = release(run, launched, outcome.exit_fields() if outcome is not None else ABANDONED)
    except Exception as exc:  # noqa: BLE001 - the release itself broke: the last resort's release
        from .salvage import last_resort

        return _keeping_usage(last_resort(run, launched, exc), outcome)
    if outcome is None:
        return internal("the run was abandoned before its end")
    if problem is not None:
        return incomplete(problem, outcome)
    return outcome


def incomplete(problem: Exception, outcome: Outcome | None) -> Outcome:
    """A release that failed (``teardown.given_back``'s failure): the runner's own failure, with
    the figures the run had measured (the engine's runs' and ``bench``'s direct samples')."""
    return _keeping_usage(faulted(problem), outcome)


def _keeping_usage(replaced: Outcome, outcome: Outcome | None) -> Outcome:
    """The runner's failure in place of ``outcome``, with the figures it had measured."""
    replaced.usage = outcome.usage if outcome is not None else None
    return replaced


def _finish(run: RunState, launched: Launched, ending: Ending):
    """The ending's report, the teardown and the drain, and the figures they leave."""
    container = launched.container
    run.cancel_timers()
    entry = ENDING_REPORTS[ending.kind]
    events = run.events
    facts = EndingFacts(run.spec, launched.child.returncode, container.soft_stop_scope, events.emit, events.writing)
    outcome = entry.report(facts, ending.detail)
    # before the figures: a tree gone by then can add nothing to them
    tree = read_tree(run.reaper, run.read_member_list)
    if run.spec.limits.requested:
        from ..events.types import LimitEvidence

        # the members, and the root wherever it is (one that left its container may have left a cap's group too)
        root = [launched.child.pid] if launched.child.returncode is None else []
        evidence = container.limit_evidence(None if tree is None else [member.pid for member in tree] + root)
        run.events.emit(LimitEvidence(memory=evidence["memory"], processes=evidence["processes"], cpu=evidence["cpu"]))
    if run.count_leaks and ending.kind is EndingKind.CHILD_EXIT:  # the root gone: the rest outlived it
        # one already dying (a signal it will die of pending, exiting) was not left running; None: not counted
        outcome.left_behind = None if tree is None else sum(not m.zombie and not dying(m.pid) for m in tree)
        if tree is None:
            outcome.members_unread = run.members_unread
    live, usage = figures(container, tree)  # None: the member read failed
    if run.events.writing:  # a dropped event's fields are not worth building
        pids_capped = run.spec.limits.max_processes is not None
        run.events.emit(ResourceSummary(**stream_summary(usage, live, container.accounts, pids_capped)))
    ended = yield from teardown(run, launched, entry.graceful, tree)
    if entry.graceful and outcome.failure is not None:  # the stop's words: known only now
        outcome.failure = facts.stopped(outcome.failure, ended.shutdown if run.kill_asked else None)
    yield from drain_outputs(run, launched)
    # the stream's summary is the reference's, at its read point; the outcome's figures are the
    # whole tree's, read again once the tree is gone, unless it was gone before the first read
    outcome.usage = ended.final(container, usage) if run.final_usage else usage
    if run.targets and ending.kind is not EndingKind.FOREGROUND:
        import processkit.engine.capture as capture  # not ``from .``: containment.__init__'s ``_lender`` says why
        import processkit.events.types as event_types  # (nor ``from ..``: a relative import asks importlib's Python)
        import processkit.capture_layout as capture_layout  # already loaded by capture's own import

        reports = {}
        for stream in launched.streams:
            reports[stream.name] = yield from capture.finished_report(stream.pump)
        finals = {
            name: reports.get(name) or capture.unused_report(run.targets[name]) for name in capture_layout.STREAMS
        }
        spec = run.spec
        if spec.capture_keep != "head":  # a carrier's caller may no longer find the record: sent
            outcome.kept = {name: report.kept for name, report in finals.items()}
            if run.ring_record:
                assert run.capture_dir is not None, "a ring record is written in the capture directory"
                made(
                    run.context,
                    spec.capture_dir,
                    capture_layout.record,
                    run.capture_dir,
                    spec.run_id,
                    spec.capture_keep,
                    finals,
                    run.targets["stdout"].live_record is not None,
                )
        captured = {name: report.as_event() for name, report in finals.items()}
        run.events.emit(event_types.OutputCaptured(stdout=captured["stdout"], stderr=captured["stderr"]))
    return outcome
