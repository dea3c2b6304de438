"""A run from spawn to ``runner_exit``: the phases in order, and the final report.

``launch`` sets up and spawns, ``race`` turns the loop until an ending wins, ``endings`` says
what that ending reports, ``teardown`` stops the tree and releases what the run made. They share
one ``RunState``; this module only puts them in order.
"""

from __future__ import annotations

import os

from ..errors import Failure, Kind
from ..events.emitter import Emitter
from ..events.types import ContainerFailed, LimitEvidence, OutputCaptured, ResourceSummary, RunnerExit
from ..spec import RunSpec
from . import launch, spawn
from .endings import ENDING_REPORTS, Ending, EndingFacts, EndingKind, Outcome
from .race import race
from .state import RunState
from .teardown import drain_outputs, release, teardown
from .terminal import HandoffError


def execute(spec: RunSpec) -> Outcome:
    """Run ``spec`` to completion. Never raises for anything the run itself can report."""
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
    try:
        return Run(RunState(spec, emitter, runner_cwd)).execute()
    finally:
        emitter.close()


class Run:
    def __init__(self, state: RunState):
        self.state = state

    def execute(self) -> Outcome:
        try:
            return self._execute()
        except Exception as exc:  # noqa: BLE001 - a bug past set-up must still release the run and end its stream
            from .salvage import last_resort

            return last_resort(self.state, exc)
        finally:
            keyboard = self.state.keyboard
            if keyboard is not None:  # whatever happened, the caller gets its terminal back
                keyboard.restore()

    def _execute(self) -> Outcome:
        run = self.state
        try:
            launch.prepare(run)
            launch.start(run)
        except Failure as failure:
            return launch.fail_before_race(run, failure)
        except spawn.AttachError as exc:
            run.events.emit(ContainerFailed(phase="attach", code=Kind.CONTAINER_ERROR.code, message=str(exc)))
            return launch.fail_before_race(run, Failure(Kind.CONTAINER_ERROR, str(exc)))
        except HandoffError as exc:
            return self._finish(Ending(EndingKind.FOREGROUND, str(exc)))
        except Exception as exc:
            if run.child is None:
                raise  # nothing to tear down yet: the last resort releases what exists
            return self._finish(Ending(EndingKind.INTERNAL, f"{type(exc).__name__}: {exc}"))
        try:
            ending = race(run)
        except Exception as exc:  # noqa: BLE001 - a bug must still end the tree and the stream
            ending = Ending(EndingKind.INTERNAL, f"{type(exc).__name__}: {exc}")
        return self._finish(ending)

    def _finish(self, ending: Ending) -> Outcome:
        run = self.state
        launched = run.launched()
        container = launched.container
        for timer in run.timers.values():
            timer.cancel()
        entry = ENDING_REPORTS[ending.kind]
        facts = EndingFacts(run.spec, run.returncode, container.soft_stop_scope, run.events.emit)
        outcome = entry.report(facts, ending.detail)
        if run.spec.limits.requested:
            evidence = container.limit_evidence()
            run.events.emit(
                LimitEvidence(memory=evidence["memory"], processes=evidence["processes"], cpu=evidence["cpu"])
            )
        usage = container.usage()
        run.events.emit(ResourceSummary(**usage.summary()))
        teardown(run, entry.graceful)
        drain_outputs(run)
        outcome.usage = container.final_usage(usage)  # the stream's summary keeps the reference's read point
        launched.signals.close()
        if run.targets and ending.kind is not EndingKind.FOREGROUND:
            from . import capture

            reports = {s.name: s.pump.report() for s in run.streams}
            finals = {name: reports.get(name) or capture.unused_report(run.targets[name]) for name in capture.STREAMS}
            if run.spec.capture_keep != "head" and run.spec.capture_dir is not None:
                from .. import capture_layout

                capture_layout.record(run.spec.capture_dir, run.spec.run_id, run.spec.capture_keep, finals)
            captured = {name: report.as_event() for name, report in finals.items()}
            run.events.emit(OutputCaptured(stdout=captured["stdout"], stderr=captured["stderr"]))
        failure = outcome.failure
        ended = (outcome.code, failure.kind.label if failure else "child_exit", None if failure else outcome.code)
        if run.publication is not None:
            run.publication.close(ended)
        release(run)
        run.events.emit(RunnerExit(code=ended[0], source=ended[1], child_code=ended[2]))
        outcome.started_ns, outcome.ended_ns = run.started_ns, run.ended_ns
        return outcome
