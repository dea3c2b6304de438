"""One qualification: do what a run does, for real, and record what was observed.

A bounded scratch run of this program's own harmless child (``doctor --scratch-child DUR``)
is started in the real registry, found the way every client finds a run, inspected and
cancelled over its control socket with the clients' own code, and then its own account of
its teardown is checked: confirmed empty, record removed, endpoint released. Each phase is
timed; a phase that fails records why (a fact about the host) and the rest are skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

from ..errors import Failure, Kind
from .findings import (
    AccountingFacts,
    ContainmentFacts,
    Findings,
    Phase,
    RegistryFacts,
    Requirements,
    ResourceFacts,
    Teardown,
)
from .findings import mismatches, report
from .scratch import scratch_dir

SCRATCH_MARGIN_MS = 5_000  # the scratch run outlives doctor's own budget, but only just
MIN_SCRATCH_MS = 100
POLL_SECONDS = 0.025
RESOURCE_CHECK_PROCESSES = 64  # --max-processes: a plausible cap, installed but never tripped


class PhaseFailed(Exception):
    """Why a phase failed: a fact about the host, recorded in the report."""


def qualify(
    program: list[str], timeout_ms: int, wanted: Requirements, *, check_resources: bool
) -> tuple[dict, str | None, AccountingFacts | None]:
    """The report of one qualification, the cgroup backend that carries a cap (if seen), and
    this host's per-run accounting (for people and ``--require-accounting``, not in the JSON).

    ``program`` is the argv prefix that starts this very processkit-cli again.
    """
    return Qualification(program, timeout_ms).run(wanted, check_resources=check_resources)


class Qualification:
    """The budget, the scratch directory and the scratch run of one qualification."""

    def __init__(self, program: list[str], timeout_ms: int):
        from ..loop import Loop

        self.program = program
        self.started = time.monotonic()
        self.deadline = self.started + timeout_ms / 1000
        self.loop = Loop()
        self.scratch = scratch_dir()
        self.found = Findings()
        self.run_id = f"doctor-{os.getpid()}-{time.time_ns():x}"
        self.jsonl = os.path.join(self.scratch, "run.jsonl")
        self.runner: subprocess.Popen | None = None

    def run(self, wanted: Requirements, *, check_resources: bool) -> tuple[dict, str | None, AccountingFacts | None]:
        try:
            if self._phase("registry", self._registry):
                steps = (
                    ("launch", self._launch),
                    ("inspect", self._inspect),
                    ("cancel", self._cancel),
                    ("terminal_wait", self._terminal_wait),
                )
                if all(self._phase(name, step) for name, step in steps):
                    self._phase("cleanup", self._cleanup)
                else:
                    self._abandon()  # a scratch run left live by a failed phase is ended anyway
            if check_resources:
                self._phase("resource_controller", self._resource_controller)
            self.found.accounting = _accounting()
        finally:
            self.loop.close()
        backend = self.found.resources.backend if self.found.resources is not None else None
        return self._settle(mismatches(self.found, wanted)), backend, self.found.accounting

    def _phase(self, name: str, step) -> bool:
        started = time.monotonic()
        try:
            step()
        except (PhaseFailed, Failure) as exc:
            detail = str(exc)
            self.found.phases.append(Phase(name, False, _ms_since(started), detail))
            self.found.failures.append(detail)
            return False
        self.found.phases.append(Phase(name, True, _ms_since(started), None))
        return True

    def _remaining_ms(self) -> int:
        return max(MIN_SCRATCH_MS, int((self.deadline - time.monotonic()) * 1000))

    def _evidence(self) -> str:
        return f"; the scratch run's output is in `{self.scratch}`"  # the reference's words

    # -- the phases, in order -------------------------------------------------------------------
    def _registry(self) -> None:
        """The mutating open a run does, then the protection re-read from the filesystem."""
        from ..registry.location import RegistryError, open_for_writing

        try:
            directory = open_for_writing()
            owner_only = os.stat(directory).st_mode & 0o777 == 0o700
        except (RegistryError, OSError) as exc:
            raise PhaseFailed(
                f"could not open the per-user run registry: {getattr(exc, 'strerror', None) or exc}"
            ) from None
        self.found.registry = RegistryFacts(directory, owner_only, "posix_0700")
        if not owner_only:
            raise PhaseFailed(f"the run registry {directory} is not protected to its owner alone")

    def _launch(self) -> None:
        """Start the scratch run and wait until a client can resolve it to a live endpoint: not
        where this /proc is another pid namespace's, which every run refuses (102), named here."""
        from ..mountinfo import foreign_proc
        from ..registry.lookup import resolve

        foreign = foreign_proc()
        if foreign is not None:
            raise PhaseFailed(f"no run can start here: {foreign}")

        budget = self._remaining_ms()
        command = [*self.program, "run", "--run-id", self.run_id, "--jsonl", self.jsonl]
        command += ["--timeout", f"{budget + SCRATCH_MARGIN_MS}ms", "--"]
        command += [*self.program, "doctor", "--scratch-child", f"{budget}ms"]
        try:
            with (
                open(os.path.join(self.scratch, "runner.stdout"), "wb") as out,
                open(os.path.join(self.scratch, "runner.stderr"), "wb") as err,
            ):
                self.runner = subprocess.Popen(
                    command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, close_fds=True
                )
        except OSError as exc:
            raise PhaseFailed(f"could not start a scratch run: {exc.strerror or exc}") from None
        runner = self.runner

        def resolved() -> bool:
            try:
                self.found.endpoint = resolve(self.run_id, "inspect").record.endpoint
            except Failure as failure:
                if failure.kind is Kind.CONTROL_UNREACHABLE:  # registered without an endpoint: final
                    raise PhaseFailed(f"the scratch run published no control endpoint{self._evidence()}") from None
                return runner.poll() is not None
            return True

        if not self.loop.run_until(resolved, self.deadline, POLL_SECONDS):
            raise PhaseFailed(f"the scratch run did not become discoverable within the budget{self._evidence()}")
        if self.found.endpoint is None:
            code = runner.returncode
            raise PhaseFailed(
                f"the scratch run exited with code {code} before it published a control endpoint{self._evidence()}"
            )

    def _inspect(self) -> None:
        from ..control.client import request_by_id
        from ..control.replies import check_snapshot

        try:
            snapshot = request_by_id(self.run_id, "inspect", check_snapshot)
        except Failure as failure:
            raise PhaseFailed(
                f"the scratch run's control socket did not answer an inspect: {failure.message}"
            ) from None
        self.found.inspected_members = len(snapshot["members"])

    def _cancel(self) -> None:
        from ..control.client import request_by_id
        from ..control.replies import ack_check

        try:
            request_by_id(self.run_id, "cancel", ack_check("cancel"))
        except Failure as failure:
            raise PhaseFailed(f"the scratch run did not accept a control-plane cancel: {failure.message}") from None
        self.found.cancel_acknowledged = True

    def _terminal_wait(self) -> None:
        """The runner exits, and its registry record is gone: polled, never assumed."""
        from ..registry import scan

        runner = self.runner
        if runner is None:  # phases stop at the first failure, so the start phase made it
            raise PhaseFailed("no scratch run was started")
        if not self.loop.run_until(lambda: runner.poll() is not None, self.deadline, POLL_SECONDS):
            raise PhaseFailed("the scratch run had not ended when the budget ran out; its own --timeout will end it")
        code = runner.returncode
        self.found.terminal_exit_code = code if code >= 0 else None

        def unregistered() -> bool:
            return not any(entry.record.run_id == self.run_id for entry in scan.read(Kind.REGISTRY_SETUP).entries)

        if not self.loop.run_until(unregistered, self.deadline, POLL_SECONDS):
            raise PhaseFailed(
                f"the scratch run ended, but its registry record was still there when the budget ran out{self._evidence()}"
            )

    def _cleanup(self) -> None:
        """The run's own account of its teardown, confirmed; then its endpoint, released."""
        events = _events(self.jsonl)
        started = events.get("run_started")
        if started is not None:
            self.found.containment = ContainmentFacts(
                started["mechanism"], started["abrupt_cleanup"], started["root_pid"]
            )
        self.found.terminal_source = events.get("runner_exit", {}).get("source")
        began, finished = events.get("cleanup_started"), events.get("cleanup_finished")
        teardown = Teardown(
            members_before=began["members_before"] if began is not None else None,
            remaining=finished["remaining"] if finished is not None else None,
            remaining_pids=finished["remaining_pids"] if finished is not None else [],
            read_error=any(event is not None and event["read_error"] is not False for event in (began, finished)),
            kill_error=finished is not None and finished["kill_error"] is not False,
            conclusive=started is None or started["mechanism"] != "process_group",
        )
        self.found.teardown = teardown
        self.found.endpoint_released = self._endpoint_released()
        problems = []
        if teardown.read_error:
            problems.append(
                "the container's members could not be read during teardown, so it was never confirmed empty"
            )
        if teardown.kill_error:
            problems.append("the hard kill of the scratch container failed")
        if teardown.remaining is None:
            problems.append("the scratch run reported no teardown, so nothing confirms its container was reaped")
        elif teardown.remaining and teardown.conclusive:
            problems.append(f"teardown left {teardown.remaining} member(s) of the scratch container")
        if not self.found.endpoint_released:
            problems.append("the scratch run's control endpoint was still present after it ended")
        if problems:
            raise PhaseFailed("; ".join(problems))

    def _endpoint_released(self) -> bool:
        """Nothing answers on the endpoint any more, and neither it nor its directory is left."""
        from ..rundir_shape import reapable_dir
        from ..control.transport import Channel

        endpoint = self.found.endpoint
        if endpoint is None:  # the start phase fails without one, so this is never reached
            return True
        try:
            Channel(endpoint, self.run_id, "inspect").close()
            return False
        except Failure:
            pass
        directory = reapable_dir(endpoint)
        return not os.path.lexists(endpoint) and not (directory is not None and os.path.lexists(directory))

    def _abandon(self) -> None:
        """A failed round-trip leaves the scratch run live: end it anyway, within the budget
        plus the margin; the run's own --timeout is the backstop beneath that."""
        from ..control.client import request_by_id
        from ..control.replies import ack_check

        runner = self.runner
        if runner is None or runner.poll() is not None:
            return
        try:
            request_by_id(self.run_id, "cancel", ack_check("cancel"))
        except Failure:
            runner.terminate()  # our own unreaped child: the runner tears its tree down
        self.loop.run_until(lambda: runner.poll() is not None, self.deadline + SCRATCH_MARGIN_MS / 1000, POLL_SECONDS)

    def _resource_controller(self) -> None:
        """Whether a whole-tree cap can be installed here: a container created with one, as a
        run asking for it would be, and the backend that carries it."""
        from .. import containment
        from ..spec import Limits

        requested = f"--max-processes {RESOURCE_CHECK_PROCESSES}"
        try:
            container = containment.create(Limits(max_processes=RESOURCE_CHECK_PROCESSES))
        except containment.LimitUnavailable as exc:
            self.found.resources = ResourceFacts(requested, False, f"the {exc.limit} limit: {exc.detail}", None)
            return
        except containment.ContainerError as exc:
            raise PhaseFailed(
                f"the container for the resource check could not be created, so nothing was established: {exc}"
            ) from None
        backend = container.limit_backend
        container.release()
        self.found.resources = ResourceFacts(requested, True, None, backend)

    # -- the verdict ------------------------------------------------------------------------------
    def _settle(self, unmet: list[str]) -> dict:
        """The report, and the scratch directory's fate: removed, or kept as diagnostics."""
        removed = False
        if not self.found.failures:
            shutil.rmtree(self.scratch, ignore_errors=True)
            removed = not os.path.lexists(self.scratch)
            if not removed:
                self.found.failures.append(f"the scratch directory {self.scratch} could not be removed")
        failed = bool(self.found.failures)
        document = report(
            self.found,
            unmet,
            elapsed_ms=_ms_since(self.started),
            scratch_removed=removed,
            diagnostics_dir=self.scratch if failed else None,
        )
        if failed:
            with open(os.path.join(self.scratch, "doctor-report.json"), "w", encoding="utf-8") as handle:
                json.dump(document, handle, indent=2)
        return document


def _accounting() -> AccountingFacts:
    """What a run's accounting would be here, from a fresh container, removed at once. Not a
    phase: the report's phases are the reference's."""
    from .. import containment
    from ..containment.accounting import RESOURCE_SUMMARY_FIELDS, mechanism
    from ..spec import NO_LIMITS

    try:
        container = containment.create(NO_LIMITS)
    except containment.ContainerError as exc:
        return AccountingFacts("none", {}, f"no container could be made to check it: {exc}")
    try:
        usage = container.usage()  # an empty group's counters: which exist, not what they say
    finally:
        container.release()
    return AccountingFacts(mechanism(usage), {field: usage.sources.get(field) for field in RESOURCE_SUMMARY_FIELDS})


def _events(path: str) -> dict[str, dict]:
    """The last schema-valid event of each type in the scratch run's stream."""
    from ..events.reader import LineSplitter
    from ..events.validate import event_validator

    from ..bounded import REPORT_STREAM, InputError, read_all

    try:
        data = read_all(path, REPORT_STREAM)
    except OSError as exc:
        raise PhaseFailed(f"could not read the scratch run's event stream {path}: {exc.strerror}") from None
    except InputError as exc:
        raise PhaseFailed(str(exc)) from None
    splitter = LineSplitter()
    found = {}
    for line in splitter.feed(data) + splitter.end():
        event = line.event
        if event is not None and event_validator().is_valid(event):
            found[event["event"]] = event
    return found


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
