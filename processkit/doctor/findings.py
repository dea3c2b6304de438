"""What a qualification observed, as typed facts (one per report section), and the report
built from them once, at the end (doctor.schema.json's shape and key order).

The ``--require-*`` expectations are checked by :func:`mismatches`, a pure function of the
facts: a requirement never changes what was observed, only the exit code.
"""

from __future__ import annotations

import sys

from ..plain import Frozen, Plain
from ..version import __version__

DOCTOR_VERSION = 1


class Phase(Frozen):
    phase: str
    ok: bool
    elapsed_ms: int
    detail: str | None


class RegistryFacts(Frozen):
    dir: str
    owner_only: bool
    protection: str


class ContainmentFacts(Frozen):
    mechanism: str
    abrupt_cleanup: str
    root_pid: int | None


class ControlFacts(Frozen):
    endpoint: str
    transport: str
    inspected_members: int
    cancel_acknowledged: bool
    terminal_exit_code: int | None
    terminal_source: str | None


class Teardown(Frozen):
    """The scratch run's own account of its teardown, as its stream tells it."""

    members_before: int | None
    remaining: int | None
    remaining_pids: list
    read_error: bool
    kill_error: bool
    conclusive: bool  # a process group's post-kill snapshot can miss nothing only on some hosts

    @property
    def confirmed_empty(self) -> bool:
        return self.members_before is not None and not self.read_error and not self.kill_error and self.remaining == 0


class ResourceFacts(Frozen):
    requested: str
    available: bool
    detail: str | None
    backend: str | None  # which cgroup version carries the cap: for people, not in the JSON


class AccountingFacts(Frozen):
    """Per-run accounting on this host: for people and ``--require-accounting``, not in the
    JSON (the reference's report allows no property of its own)."""

    mechanism: str  # cgroup_v1, cgroup_v2, rusage, several joined by "+", or none
    counters: dict  # resource_summary figure -> the counter that gives it, None where none does
    detail: str | None = None  # why the check could not be made


class Requirements(Frozen):
    mechanism: str | None
    abrupt_cleanup: str | None
    resource_controller: bool
    accounting: str | None = None


class Findings(Plain):
    """Each field is filled once, by the phase that observes it; None means never observed."""

    phases: list[Phase] = []
    failures: list[str] = []
    registry: RegistryFacts | None = None
    endpoint: str | None = None
    inspected_members: int | None = None
    cancel_acknowledged: bool = False
    terminal_exit_code: int | None = None
    terminal_source: str | None = None
    containment: ContainmentFacts | None = None
    teardown: Teardown | None = None
    endpoint_released: bool = False
    resources: ResourceFacts | None = None
    accounting: AccountingFacts | None = None


def mismatches(found: Findings, wanted: Requirements) -> list[str]:
    """The unmet --require-* expectations, each naming the required and the observed value."""
    unmet = []
    for required, key, what, verb in (
        (wanted.mechanism, "mechanism", "containment mechanism", "selected"),
        (wanted.abrupt_cleanup, "abrupt_cleanup", "abrupt-cleanup level", "reports"),
    ):
        if required is None:
            continue
        if found.containment is None:
            unmet.append(f"requires {what} `{required}`, but this qualification never observed one")
        elif getattr(found.containment, key) != required:
            unmet.append(f"requires {what} `{required}`, but this host {verb} `{getattr(found.containment, key)}`")
    if wanted.resource_controller:
        wants = "requires an enforceable whole-tree resource controller, but"
        resources = found.resources
        if resources is None:
            unmet.append(f"{wants} this qualification never established whether this host has one")
        elif not resources.available:
            unmet.append(f"{wants} `{resources.requested}` could not be applied on this host: {resources.detail}")
    if wanted.accounting is not None:
        observed = found.accounting.mechanism if found.accounting is not None else None
        if observed != wanted.accounting:
            unmet.append(f"requires per-run accounting through `{wanted.accounting}`, but this host gives `{observed}`")
    return unmet


def report(
    found: Findings, unmet: list[str], *, elapsed_ms: int, scratch_removed: bool, diagnostics_dir: str | None
) -> dict:
    """The report document, in the schema's key order."""
    control = None
    if found.endpoint is not None and found.inspected_members is not None:
        control = ControlFacts(
            endpoint=found.endpoint,
            transport="unix_socket",
            inspected_members=found.inspected_members,
            cancel_acknowledged=found.cancel_acknowledged,
            terminal_exit_code=found.terminal_exit_code,
            terminal_source=found.terminal_source,
        )._asdict()
    cleanup = None
    if found.teardown is not None:
        teardown = found.teardown
        cleanup = {
            "members_before": teardown.members_before,
            "remaining": teardown.remaining,
            "remaining_pids": teardown.remaining_pids,
            "read_error": teardown.read_error,
            "kill_error": teardown.kill_error,
            "confirmed_empty": teardown.confirmed_empty,
            "teardown_snapshot_conclusive": teardown.conclusive,
            "registry_record_removed": True,  # the terminal wait polled until it was gone
            "endpoint_released": found.endpoint_released,
            "scratch_removed": scratch_removed,
        }
    resources = None
    if found.resources is not None:
        resources = {key: getattr(found.resources, key) for key in ("requested", "available", "detail")}
    return {
        "doctor_version": DOCTOR_VERSION,
        "binary": "processkit-cli",
        "version": __version__,
        "os": {"darwin": "macos", "win32": "windows"}.get(sys.platform, sys.platform),
        "qualified": not found.failures and not unmet,
        "registry": None if found.registry is None else found.registry._asdict(),
        "containment": None if found.containment is None else found.containment._asdict(),
        "control": control,
        "cleanup": cleanup,
        "resource_controller": resources,
        "phases": [phase._asdict() for phase in found.phases],
        "elapsed_ms": elapsed_ms,
        "failures": list(found.failures),
        "mismatches": unmet,
        "diagnostics_dir": diagnostics_dir,
    }


def unqualified_message(document: dict) -> str:
    parts = []
    if document["failures"]:
        parts.append("this host did not complete the runtime qualification: " + "; ".join(document["failures"]))
    if document["mismatches"]:
        parts.append("this host does not meet the requested requirements: " + "; ".join(document["mismatches"]))
    if document["diagnostics_dir"] is not None:
        parts.append(f"diagnostics kept in `{document['diagnostics_dir']}`")
    return "; ".join(parts)
