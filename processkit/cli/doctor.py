"""``doctor``: qualify this host by doing what a run does, for real, and reporting what was
observed (control-plane.md §4, doctor.schema.json).

``probe`` says what this binary is; ``doctor`` says what this host did. It starts a bounded
scratch run of this program's own harmless child (``doctor --scratch-child DUR``, a sleep) in
the real registry, finds it the way every client does, inspects and cancels it over its
control socket with the same client code ``inspect`` and ``cancel`` use, and then checks the
run's own account of its teardown: confirmed empty, record removed, endpoint released.

The ``--require-*`` flags only decide the exit code (116); the report is the same either way.
The scratch directory (fresh, 0700) holds the run's JSONL and output; it is deleted on success
and kept, with the report in it, when a phase failed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from .. import __version__
from ..errors import Failure, Kind, usage
from . import output, values
from .parsing import Once, OnceFlag, Parser, flag_given

DOCTOR_VERSION = 1
DEFAULT_TIMEOUT_MS = 30_000
SCRATCH_MARGIN_MS = 5_000  # the scratch run outlives doctor's own budget, but only just
MIN_SCRATCH_MS = 100
POLL_SECONDS = 0.025
RESOURCE_CHECK_PROCESSES = 64  # --max-processes: a plausible cap, installed but never tripped
MECHANISMS = ("job_object", "cgroup_v2", "process_group", "process_reaper", "unknown")
ABRUPT_CLEANUP = ("whole_tree", "direct_child_only", "none")
PHASE_FLAGS = (
    "json",
    "timeout",
    "check_resource_controller",
    "require_mechanism",
    "require_abrupt_cleanup",
    "require_resource_controller",
)


def build_parser() -> Parser:
    parser = Parser(
        prog="processkit-cli doctor",
        usage="processkit-cli doctor [--json] [--timeout <DUR>] [--check-resource-controller] "
        "[--require-mechanism <M>] [--require-abrupt-cleanup <LEVEL>] [--require-resource-controller]",
        description="Qualify this host with a real, bounded scratch run.",
    )
    add = parser.add_argument
    add("--json", action=OnceFlag, help="the report as one JSON line")
    add("--timeout", action=Once, metavar="DUR", help="the whole qualification's budget (default 30s)")
    add("--check-resource-controller", action=OnceFlag, help="also check that a whole-tree cap can be installed")
    add("--require-mechanism", action=Once, choices=MECHANISMS)
    add("--require-abrupt-cleanup", action=Once, choices=ABRUPT_CLEANUP)
    add("--require-resource-controller", action=OnceFlag, help="needs --check-resource-controller")
    add("--scratch-child", action=Once, metavar="DUR", help="be the harmless scratch child: sleep, exit 0")
    return parser


def main(argv: list[str], invocation) -> int:
    args = build_parser().parse(argv)
    if args.scratch_child is not None:
        if any(flag_given(args, flag) for flag in PHASE_FLAGS):
            raise usage("the argument '--scratch-child <DUR>' cannot be used with any other argument")
        # The whole contract: the container around it is under test, so it does nothing else.
        time.sleep(values.parse_duration_ms(args.scratch_child, positive=True, flag="--scratch-child") / 1000)
        return 0
    if args.require_resource_controller and not args.check_resource_controller:
        raise usage("the argument '--require-resource-controller' requires '--check-resource-controller'")
    timeout_ms = DEFAULT_TIMEOUT_MS
    if args.timeout is not None:
        timeout_ms = values.parse_duration_ms(args.timeout, positive=True, flag="--timeout")
    qualification = Qualification(timeout_ms)
    report = qualification.run(args)
    if args.json:
        output.json_line(report)
    else:
        output.lines(render(report, qualification.limit_backend))
    if not report["qualified"]:
        raise Failure(Kind.HOST_UNQUALIFIED, _unqualified(report))
    return 0


class PhaseFailed(Exception):
    """Why a phase failed: a fact about the host, recorded in the report."""


class Qualification:
    """One qualification: its budget, its scratch directory, and the facts gathered so far."""

    def __init__(self, timeout_ms: int):
        from ..engine.loop import Loop

        self.started = time.monotonic()
        self.deadline = self.started + timeout_ms / 1000
        self.loop = Loop()
        self.scratch = _scratch_dir()
        self.phases: list[dict] = []
        self.failures: list[str] = []
        self.facts: dict = {key: None for key in ("registry", "containment", "control", "cleanup", "resource_controller")}
        self.run_id = f"doctor-{os.getpid()}-{time.time_ns():x}"
        self.jsonl = os.path.join(self.scratch, "run.jsonl")
        self.runner: subprocess.Popen | None = None
        self.endpoint: str | None = None
        self.limit_backend: str | None = None  # which cgroup version carries a cap (human report)

    # -- the phases, in order ---------------------------------------------------------------
    def run(self, args) -> dict:
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
            if args.check_resource_controller:
                self._phase("resource_controller", self._resource_controller)
        finally:
            self.loop.close()
        return self._report(self._mismatches(args))

    def _phase(self, name: str, step) -> bool:
        started = time.monotonic()
        try:
            step()
        except (PhaseFailed, Failure) as exc:
            detail = str(exc)
            self.phases.append({"phase": name, "ok": False, "elapsed_ms": _ms_since(started), "detail": detail})
            self.failures.append(detail)
            return False
        self.phases.append({"phase": name, "ok": True, "elapsed_ms": _ms_since(started), "detail": None})
        return True

    def _remaining_ms(self) -> int:
        return max(MIN_SCRATCH_MS, int((self.deadline - time.monotonic()) * 1000))

    def _registry(self) -> None:
        """The mutating open a run does, then the protection re-read from the filesystem."""
        from ..registry.location import RegistryError, open_for_writing

        try:
            directory = open_for_writing()
            owner_only = os.stat(directory).st_mode & 0o777 == 0o700
        except (RegistryError, OSError) as exc:
            raise PhaseFailed(f"could not open the per-user run registry: {getattr(exc, 'strerror', None) or exc}") from None
        self.facts["registry"] = {"dir": directory, "owner_only": owner_only, "protection": "posix_0700"}
        if not owner_only:
            raise PhaseFailed(f"the run registry {directory} is not protected to its owner alone")

    def _launch(self) -> None:
        """Start the scratch run and wait until a client can resolve it to a live endpoint."""
        from ..control import client
        from .selfexec import program

        budget = self._remaining_ms()
        command = [*program(), "run", "--run-id", self.run_id, "--jsonl", self.jsonl]
        command += ["--timeout", f"{budget + SCRATCH_MARGIN_MS}ms", "--"]
        command += [*program(), "doctor", "--scratch-child", f"{budget}ms"]
        try:
            with open(os.path.join(self.scratch, "runner.stdout"), "wb") as out, open(
                os.path.join(self.scratch, "runner.stderr"), "wb"
            ) as err:
                self.runner = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, close_fds=True)
        except OSError as exc:
            raise PhaseFailed(f"could not start a scratch run: {exc.strerror or exc}") from None

        def resolved() -> bool:
            try:
                self.endpoint = client.resolve(self.run_id).record.endpoint
            except Failure as failure:
                if failure.kind is Kind.CONTROL_UNREACHABLE:  # registered without an endpoint: final
                    raise PhaseFailed(f"the scratch run published no control endpoint{self._evidence()}") from None
                return self.runner.poll() is not None
            return True

        if not self.loop.run_until(resolved, self.deadline, POLL_SECONDS):
            raise PhaseFailed(f"the scratch run did not become discoverable within the budget{self._evidence()}")
        if self.endpoint is None:
            code = self.runner.returncode
            raise PhaseFailed(f"the scratch run exited with code {code} before it published a control endpoint{self._evidence()}")

    def _inspect(self) -> None:
        from ..control import client

        try:
            snapshot = client.request_by_id(self.run_id, "inspect", client.check_snapshot)
        except Failure as failure:
            raise PhaseFailed(f"the scratch run's control socket did not answer an inspect: {failure.message}") from None
        self.facts["control"] = {
            "endpoint": self.endpoint,
            "transport": "unix_socket",
            "inspected_members": len(snapshot["members"]),
            "cancel_acknowledged": False,
            "terminal_exit_code": None,
            "terminal_source": None,
        }

    def _cancel(self) -> None:
        from ..control import client

        try:
            client.request_by_id(self.run_id, "cancel", client.ack_check("cancel"))
        except Failure as failure:
            raise PhaseFailed(f"the scratch run did not accept a control-plane cancel: {failure.message}") from None
        self.facts["control"]["cancel_acknowledged"] = True

    def _terminal_wait(self) -> None:
        """The runner exits, and its registry record is gone: polled, never assumed."""
        from ..registry import scan

        if not self.loop.run_until(lambda: self.runner.poll() is not None, self.deadline, POLL_SECONDS):
            raise PhaseFailed("the scratch run had not ended when the budget ran out; its own --timeout will end it")
        code = self.runner.returncode
        self.facts["control"]["terminal_exit_code"] = code if code >= 0 else None

        def unregistered() -> bool:
            return not any(entry.record.run_id == self.run_id for entry in scan.read(Kind.REGISTRY).entries)

        if not self.loop.run_until(unregistered, self.deadline, POLL_SECONDS):
            raise PhaseFailed(
                f"the scratch run ended, but its registry record was still there when the budget ran out{self._evidence()}"
            )

    def _cleanup(self) -> None:
        """The run's own account of its teardown, confirmed; then its endpoint, released."""
        events = _events(self.jsonl)
        started = events.get("run_started")
        if started is not None:
            self.facts["containment"] = {key: started.get(key) for key in ("mechanism", "abrupt_cleanup", "root_pid")}
        self.facts["control"]["terminal_source"] = events.get("runner_exit", {}).get("source")
        began, finished = events.get("cleanup_started"), events.get("cleanup_finished")
        remaining = finished.get("remaining") if finished is not None else None
        read_error = any(event is not None and event.get("read_error") is not False for event in (began, finished))
        kill_error = finished is not None and finished.get("kill_error") is not False
        conclusive = started is None or started.get("mechanism") != "process_group"
        released = self._endpoint_released()
        self.facts["cleanup"] = {
            "members_before": began.get("members_before") if began is not None else None,
            "remaining": remaining,
            "remaining_pids": finished.get("remaining_pids", []) if finished is not None else [],
            "read_error": read_error,
            "kill_error": kill_error,
            "confirmed_empty": began is not None and not read_error and not kill_error and remaining == 0,
            "teardown_snapshot_conclusive": conclusive,
            "registry_record_removed": True,  # terminal_wait polled until it was gone
            "endpoint_released": released,
            "scratch_removed": False,  # settled with the report
        }
        problems = []
        if read_error:
            problems.append("the container's members could not be read during teardown, so it was never confirmed empty")
        if kill_error:
            problems.append("the hard kill of the scratch container failed")
        if remaining is None:
            problems.append("the scratch run reported no teardown, so nothing confirms its container was reaped")
        elif remaining and conclusive:
            problems.append(f"teardown left {remaining} member(s) of the scratch container")
        if not released:
            problems.append("the scratch run's control endpoint was still present after it ended")
        if problems:
            raise PhaseFailed("; ".join(problems))

    def _endpoint_released(self) -> bool:
        from ..control import client
        from ..rundir import reapable_dir

        try:
            client.Channel(self.endpoint, self.run_id).close()
            return False
        except Failure:
            pass
        directory = reapable_dir(self.endpoint)
        return not os.path.lexists(self.endpoint) and not (directory is not None and os.path.lexists(directory))

    def _abandon(self) -> None:
        """A failed round-trip leaves the scratch run live: end it anyway, within the budget
        plus the margin; the run's own --timeout is the backstop beneath that."""
        from ..control import client

        if self.runner is None or self.runner.poll() is not None:
            return
        try:
            client.request_by_id(self.run_id, "cancel", client.ack_check("cancel"))
        except Failure:
            self.runner.terminate()  # our own unreaped child: the runner tears its tree down
        self.loop.run_until(lambda: self.runner.poll() is not None, self.deadline + SCRATCH_MARGIN_MS / 1000, POLL_SECONDS)

    def _resource_controller(self) -> None:
        """Whether a whole-tree cap can be installed here: a container created with one, as a
        run asking for it would be, and the backend that carries it."""
        from .. import containment
        from ..spec import Limits

        facts = {"requested": f"--max-processes {RESOURCE_CHECK_PROCESSES}", "available": True, "detail": None}
        try:
            container = containment.create(Limits(max_processes=RESOURCE_CHECK_PROCESSES))
        except containment.LimitUnavailable as exc:
            facts.update(available=False, detail=f"the {exc.limit} limit: {exc.detail}")
        except containment.ContainerError as exc:
            raise PhaseFailed(f"the container for the resource check could not be created, so nothing was established: {exc}") from None
        else:
            self.limit_backend = container.limit_backend
            container.release()
        self.facts["resource_controller"] = facts

    def _evidence(self) -> str:
        return f"; the scratch run's output is in {self.scratch}"

    # -- the verdict --------------------------------------------------------------------------
    def _mismatches(self, args) -> list[str]:
        """The unmet --require-* expectations: a pure function of what was observed."""
        mismatches = []
        containment = self.facts["containment"]
        for wanted, key, what in (
            (args.require_mechanism, "mechanism", "containment mechanism"),
            (args.require_abrupt_cleanup, "abrupt_cleanup", "abrupt-cleanup level"),
        ):
            if wanted is None:
                continue
            if containment is None:
                mismatches.append(f"requires {what} {wanted}, but this qualification never observed one")
            elif containment[key] != wanted:
                mismatches.append(f"requires {what} {wanted}, but this host reports {containment[key]}")
        if args.require_resource_controller:
            facts = self.facts["resource_controller"]
            wanted = "requires an enforceable whole-tree resource controller, but"
            if facts is None:
                mismatches.append(f"{wanted} this qualification never established whether there is one")
            elif not facts["available"]:
                mismatches.append(f"{wanted} {facts['requested']} cannot be applied here: {facts['detail']}")
        return mismatches

    def _report(self, mismatches: list[str]) -> dict:
        """The report, and the scratch directory's fate: removed, or kept as diagnostics."""
        removed = False
        if not self.failures:
            shutil.rmtree(self.scratch, ignore_errors=True)
            removed = not os.path.lexists(self.scratch)
            if not removed:
                self.failures.append(f"the scratch directory {self.scratch} could not be removed")
        if self.facts["cleanup"] is not None:
            self.facts["cleanup"]["scratch_removed"] = removed
        report = {
            "doctor_version": DOCTOR_VERSION,
            "binary": "processkit-cli",
            "version": __version__,
            "os": {"darwin": "macos", "win32": "windows"}.get(sys.platform, sys.platform),
            "qualified": not self.failures and not mismatches,
            **self.facts,
            "phases": self.phases,
            "elapsed_ms": _ms_since(self.started),
            "failures": self.failures,
            "mismatches": mismatches,
            "diagnostics_dir": self.scratch if self.failures else None,
        }
        if self.failures:
            with open(os.path.join(self.scratch, "doctor-report.json"), "w", encoding="utf-8") as handle:
                json.dump(report, handle, indent=2)
        return report


def _scratch_dir() -> str:
    """A new 0700 directory: created, never adopted (the temp dir is shared with other users)."""
    for _ in range(16):
        path = os.path.join(tempfile.gettempdir(), f"processkit-cli-doctor-{os.getpid()}-{time.time_ns():x}")
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        except OSError as exc:
            raise Failure(Kind.SETUP, f"cannot create the doctor scratch directory {path}: {exc.strerror}") from None
        return path
    raise Failure(Kind.SETUP, f"cannot create a fresh doctor scratch directory in {tempfile.gettempdir()}")


def _events(path: str) -> dict[str, dict]:
    """The last schema-valid event of each type in the scratch run's stream."""
    from ..events.reader import LineSplitter
    from ..events.validate import event_validator

    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise PhaseFailed(f"could not read the scratch run's event stream {path}: {exc.strerror}") from None
    splitter = LineSplitter()
    found = {}
    for line in splitter.feed(data) + splitter.end():
        event = line.event
        if event is not None and event_validator().is_valid(event):
            found[event["event"]] = event
    return found


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _unqualified(report: dict) -> str:
    parts = []
    if report["failures"]:
        parts.append("this host did not complete the runtime qualification: " + "; ".join(report["failures"]))
    if report["mismatches"]:
        parts.append("this host does not meet the requested requirements: " + "; ".join(report["mismatches"]))
    if report["diagnostics_dir"] is not None:
        parts.append(f"diagnostics kept in {report['diagnostics_dir']}")
    return "; ".join(parts)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def render(report: dict, limit_backend: str | None) -> list[str]:
    """The same facts for a person; every value that came from outside is sanitized."""
    cell = output.cell
    verdict = "qualified" if report["qualified"] else "NOT qualified"
    lines = [f"processkit-cli {report['version']} on {report['os']}: {verdict} ({report['elapsed_ms']}ms)"]
    facts = []
    registry = report["registry"]
    if registry is not None:
        facts.append(("registry", f"{cell(registry['dir'])} (owner-only: {_yes(registry['owner_only'])}, {registry['protection']})"))
    containment = report["containment"]
    if containment is not None:
        facts.append(("containment", f"{cell(containment['mechanism'])} (abrupt cleanup: {cell(containment['abrupt_cleanup'])})"))
    control = report["control"]
    if control is not None:
        source = control["terminal_source"]
        facts.append((
            "control",
            f"{cell(control['endpoint'])} ({control['transport']}); inspect saw {control['inspected_members']} member(s), "
            f"cancel acknowledged: {_yes(control['cancel_acknowledged'])}, "
            + (f"run ended with source {cell(source)}" if source else "run ended without a terminal event"),
        ))
    cleanup = report["cleanup"]
    if cleanup is not None:
        inconclusive = "" if cleanup["teardown_snapshot_conclusive"] else ", post-kill snapshot inconclusive here"
        facts.append((
            "cleanup",
            f"confirmed empty: {_yes(cleanup['confirmed_empty'])} (remaining: {cell(cleanup['remaining'])}{inconclusive}); "
            f"record removed: {_yes(cleanup['registry_record_removed'])}, "
            f"endpoint released: {_yes(cleanup['endpoint_released'])}, scratch removed: {_yes(cleanup['scratch_removed'])}",
        ))
    resources = report["resource_controller"]
    if resources is not None:
        how = f"via {limit_backend}" if limit_backend else cell(resources["detail"])
        facts.append(("resources", f"{resources['requested']} enforceable: {_yes(resources['available'])} ({how})"))
    facts.append(("phases", ", ".join(f"{p['phase']} {'' if p['ok'] else 'FAILED '}{p['elapsed_ms']}ms" for p in report["phases"])))
    facts += [("failure", cell(failure)) for failure in report["failures"]]
    facts += [("mismatch", cell(mismatch)) for mismatch in report["mismatches"]]
    if report["diagnostics_dir"] is not None:
        facts.append(("diagnostics", f"kept in {cell(report['diagnostics_dir'])}"))
    return lines + [f"  {label + ':':<13}{text}" for label, text in facts]
