"""A run from setup to ``runner_exit``: the phases in order, and the final report.

``launch`` sets up and spawns and returns what it launched, ``race`` waits until an ending wins,
``endings`` says what that ending reports, ``teardown`` stops the tree, and ``release`` gives back
whatever the run made, in one place whatever step it reached or whatever raised. A run is a
generator of waits (``steps``) that a ``Host`` carries on its loop; ``execute`` is the host
carrying one run, as ``run`` does, and ``batch`` carries many side by side.
"""

from __future__ import annotations

import os

from ..errors import Failure, Kind
from ..events.emitter import Emitter
from ..events.types import ContainerFailed, LimitEvidence, OutputCaptured, ResourceSummary, RunnerExit
from ..spec import RunSpec
from . import launch, spawn
from .endings import ENDING_REPORTS, Ending, EndingFacts, EndingKind, Outcome
from .host import Host
from .race import race
from .state import Launched, RunState
from .teardown import drain_outputs, release, teardown


def execute(spec: RunSpec) -> Outcome:
    """Run ``spec`` to completion in a host of its own. Never raises for anything the run
    itself can report."""
    host = Host()
    try:
        outcome = host.carry(steps(host, spec))
    finally:
        host.close()
    assert isinstance(outcome, Outcome)
    return outcome


def steps(host: Host, spec: RunSpec):
    """One run on ``host``'s loop, as a generator of waits; returns its Outcome."""
    try:
        runner_cwd = os.getcwd()
    except OSError as exc:
        return Outcome(
            Kind.SETUP.code, Failure(Kind.SETUP, f"cannot read the runner's working directory: {exc.strerror}")
        )
    try:
        emitter = Emitter(spec.jsonl)
    except OSError as exc:
        return Outcome(Kind.SETUP.code, Failure(Kind.SETUP, f"cannot open --jsonl {spec.jsonl}: {exc.strerror}"))
    run = RunState(spec, emitter, runner_cwd, host.loop, host.reaper)
    host.runs.add(run)
    try:
        return (yield from _phases(host, run))
    finally:
        host.runs.discard(run)
        emitter.close()


def _phases(host: Host, run: RunState):
    launched: Launched | None = None
    try:
        try:
            launch.prepare(host, run)
            launched = launch.start(host, run)
        except Failure as failure:
            outcome = Outcome(failure.code, failure)
        except spawn.AttachError as exc:
            run.events.emit(ContainerFailed(phase="attach", code=Kind.CONTAINER_ERROR.code, message=str(exc)))
            outcome = Outcome(Kind.CONTAINER_ERROR.code, Failure(Kind.CONTAINER_ERROR, str(exc)))
        if launched is not None:
            if launched.handoff is not None:
                ending = Ending(EndingKind.FOREGROUND, launched.handoff)
            else:
                try:
                    ending = yield from race(run, launched)
                except Exception as exc:  # noqa: BLE001 - a bug must still end the tree and the stream
                    ending = Ending(EndingKind.INTERNAL, f"{type(exc).__name__}: {exc}")
            outcome = yield from _finish(run, launched, ending)
    except Exception as exc:  # noqa: BLE001 - a bug after the first resource: still released, still reported
        if launched is not None:
            _kill_quietly(launched)
        outcome = Outcome(Kind.INTERNAL.code, Failure(Kind.INTERNAL, f"internal error: {type(exc).__name__}: {exc}"))
    finally:
        release(run, launched)
    own = outcome.failure
    run.events.emit(
        RunnerExit(
            code=outcome.code,
            source=own.kind.label if own else "child_exit",
            child_code=None if own else outcome.code,
        )
    )
    if launched is not None:
        outcome.started_ns, outcome.ended_ns = launched.started_ns, launched.ended_ns
    return outcome


def _kill_quietly(launched: Launched) -> None:
    try:
        launched.container.kill_all()
    except OSError:
        pass


def _finish(run: RunState, launched: Launched, ending: Ending):
    """The ending's report, the teardown and the drain, and the figures they leave."""
    container = launched.container
    for timer in run.timers.values():
        timer.cancel()
    entry = ENDING_REPORTS[ending.kind]
    facts = EndingFacts(run.spec, launched.child.returncode, container.soft_stop_scope, run.events.emit)
    outcome = entry.report(facts, ending.detail)
    if run.spec.limits.requested:
        evidence = container.limit_evidence()
        run.events.emit(LimitEvidence(memory=evidence["memory"], processes=evidence["processes"], cpu=evidence["cpu"]))
    run.events.emit(ResourceSummary(**container.resource_summary()._asdict()))
    yield from teardown(run, launched, entry.graceful)
    yield from drain_outputs(run, launched)
    if run.targets and ending.kind is not EndingKind.FOREGROUND:
        from . import capture

        reports = {s.name: s.pump.report() for s in launched.streams}
        captured = {
            name: (reports.get(name) or capture.unused_report(run.targets[name])).as_event() for name in capture.STREAMS
        }
        run.events.emit(OutputCaptured(stdout=captured["stdout"], stderr=captured["stderr"]))
    return outcome
