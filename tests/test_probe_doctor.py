"""``probe`` (what this binary is, with no side effects) and ``doctor`` (what this host does
with a real scratch run), both held to the reference report schemas."""

from __future__ import annotations

import json
import os
import re
import stat
from importlib import resources

import pytest

from conftest import REFERENCE_SCHEMAS, require_reference_schemas, run_cli
from control_support import check_schema, envelope, json_out, listed, mode
from processkit.cli.main import COMMANDS

PHASES = ["registry", "launch", "inspect", "cancel", "terminal_wait", "cleanup"]


@pytest.fixture
def scratch_tmp(tmp_path, monkeypatch):
    """doctor's temp directory, watched: a qualified host must leave nothing in it."""
    directory = tmp_path / "tmpdir"
    directory.mkdir()
    monkeypatch.setenv("TMPDIR", str(directory))
    return directory


def test_the_reference_samples_pass_their_schemas():
    require_reference_schemas()
    for name in ("probe", "doctor"):
        for line in (REFERENCE_SCHEMAS / f"{name}.sample.jsonl").read_text().splitlines():
            check_schema(name, json.loads(line))


# -- probe ---------------------------------------------------------------------------------------
def test_probe_reports_a_compatible_surface():
    report = json_out(run_cli("probe", "--json"))
    check_schema("probe", report)
    assert report["compatible"] is True and report["mismatches"] == []
    assert (report["binary"], report["probe_version"], report["schema_version"]) == ("processkit-cli", 1, 1)
    assert report["exit_code_band"] == {"start": 100, "end": 119}
    for token in ("run", "run:--detach", "inspect:--json", "events:--follow", "doctor:--json", "probe:--print-schema"):
        assert token in report["surface"]
    assert {"attest:peer-identity", "run:resource-summary", "capture-keep:layout"} <= set(report["surface"])
    assert report["surface"] == sorted(set(report["surface"]))


def test_the_surface_is_exactly_what_each_subcommand_accepts():
    """Every subcommand and every long flag its parser takes, plus the global --error-format;
    nothing the parsers would refuse."""
    surface = set(json_out(run_cli("probe", "--json"))["surface"])
    capabilities = {
        "attest:peer-identity",
        "run:resource-summary",
        "wait:ended-outcome",
        "kill:ends-grace",
        "detach:input-fds",
        "paths:private",
        "jsonl:held-runs-without",
        "registry:jsonl-held",
        "registry:batch-delegation",
        "capture-keep:layout",
        "capture-keep:live",
        "bench:hyperfine-json",
        "bench:hyperfine-commands",
        "bench:shell-startup-subtracted",
        "bench:baseline-gate",
        "bench:load-aware-gate",
        "bench:timeout-aware-gate",
        "bench:throttle-aware-gate",
        "bench:wait-aware-gate",
        "bench:off-cpu-gate",
        "bench:counters",
        "bench:tree-peak-memory",
        "bench:hyperfine-cpu",
        "batch:command-templates",
        "batch:sources-from-last",
        "batch:relative-jobs",
        "batch:job-graph",
        "batch:slots-groups",
        "batch:flaky-jobs",
        "batch:oom-kills",
        "batch:pids-cap-refused",
        "batch:leaks",
        "batch:leaks-unknown",
        "batch:slow-lines",
        "batch:attempt-signals",
        "batch:content-resume",
    }
    expected = set(capabilities)
    for command in COMMANDS:
        helped = run_cli(command, "--help")
        assert helped.returncode == 0, (command, helped.stderr)
        flags = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", helped.stdout.decode())) - {"--help"}
        expected |= {command} | {f"{command}:{flag}" for flag in flags | {"--error-format"}}
    assert surface == expected


# Every flag each subcommand had when the surface was first derived from the parsers: a flag may
# be added, never dropped (a launcher may --require-surface any of these).
KNOWN_FLAGS = {
    "run": (
        "--argv-raw",
        "--capture-dir",
        "--capture-max-bytes",
        "--capture-overflow",
        "--cpu-quota",
        "--create-no-window",
        "--cwd",
        "--detach",
        "--env",
        "--env-clear",
        "--env-file",
        "--env-remove",
        "--grace",
        "--idle-timeout",
        "--inherit-stdin",
        "--inherit-stdio",
        "--jsonl",
        "--label",
        "--max-memory",
        "--max-processes",
        "--no-echo",
        "--run-id",
        "--run-id-env",
        "--snapshot-interval",
        "--stdin-file",
        "--timeout",
        "--windows-graceful-ctrl-break",
    ),
    "list": ("--health", "--json", "--label"),
    "inspect": ("--all", "--json", "--label", "--run-id"),
    "cancel": ("--all", "--label", "--run-id"),
    "kill": ("--all", "--label", "--run-id"),
    "attest": ("--json", "--run-id"),
    "wait": ("--all", "--label", "--report-outcome", "--run-id", "--timeout"),
    "prune": ("--dry-run", "--json", "--label"),
    "events": ("--file", "--follow", "--json", "--run-id", "--validate"),
    "probe": ("--json", "--print-schema", "--require-exit-code-band", "--require-schema-version", "--require-surface"),
    "doctor": (
        "--check-resource-controller",
        "--json",
        "--require-abrupt-cleanup",
        "--require-mechanism",
        "--require-resource-controller",
        "--scratch-child",
        "--timeout",
    ),
}


def test_the_surface_keeps_every_known_flag():
    surface = set(json_out(run_cli("probe", "--json"))["surface"])
    known = {f"{command}:{flag}" for command, flags in KNOWN_FLAGS.items() for flag in flags + ("--error-format",)}
    assert set(KNOWN_FLAGS) | known <= surface, sorted((set(KNOWN_FLAGS) | known) - surface)


def test_unmet_requirements_are_110_with_the_report_still_printed():
    proc = run_cli(
        "--error-format",
        "json",
        "probe",
        "--json",
        "--require-schema-version",
        "2",
        "--require-exit-code-band",
        "100-120",
        "--require-surface",
        "run:--detach",
        "--require-surface",
        "run:--not-a-flag",
    )
    assert proc.returncode == 110
    report = json_out(proc)
    check_schema("probe", report)
    assert report["compatible"] is False and len(report["mismatches"]) == 3
    assert any("run:--not-a-flag" in m for m in report["mismatches"])
    said = envelope(proc)
    assert said["kind"] == "probe_incompatible"
    # the reference's words, the mismatches after them
    assert said["message"] == "this binary is incompatible with the requested launch surface: " + "; ".join(
        report["mismatches"]
    )


def test_met_requirements_pass():
    proc = run_cli(
        "probe",
        "--json",
        "--require-schema-version",
        "1",
        "--require-exit-code-band",
        "100-119",
        "--require-surface",
        "attest:peer-identity",
        "--require-surface",
        "run:--jsonl",
    )
    assert proc.returncode == 0 and json_out(proc)["compatible"] is True


def test_print_schema_is_the_shipped_schema_byte_for_byte():
    proc = run_cli("probe", "--json", "--print-schema")
    assert proc.returncode == 0
    assert proc.stdout == resources.files("processkit.events").joinpath("events-v1.schema.json").read_bytes()


@pytest.mark.parametrize(
    "args",
    [
        ("--print-schema", "--json", "--require-surface", "run"),
        ("--print-schema", "--json", "--require-schema-version", "1"),
        ("--require-schema-version", "1"),
        ("--json", "--require-exit-code-band", "100to119"),
        ("--json", "--require-exit-code-band", "119-100"),  # a band ends where it starts or later
        ("--json", "--require-schema-version", "-1"),
    ],
)
def test_malformed_probes_are_usage_errors(args):
    proc = run_cli("probe", *args)
    assert proc.returncode == 100 and proc.stdout == b""


def test_probe_has_no_side_effects(tmp_path, monkeypatch):
    registry, scratch = tmp_path / "registry-never-made", tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("PROCESSKIT_CLI_REGISTRY_DIR", str(registry))
    monkeypatch.setenv("TMPDIR", str(scratch))
    assert run_cli("probe", "--json").returncode == 0
    assert not registry.exists() and list(scratch.iterdir()) == []


# -- doctor --------------------------------------------------------------------------------------
def doctor(*args, expect: int) -> dict:
    proc = run_cli("doctor", "--json", *args)
    assert proc.returncode == expect, (proc.stdout, proc.stderr)
    report = json_out(proc)
    check_schema("doctor", report)
    return report


def test_doctor_qualifies_this_host_with_a_real_scratch_run(isolated_registry, scratch_tmp):
    os.rmdir(isolated_registry)  # the qualification's registry phase makes it, 0700
    report = doctor(expect=0)
    assert report["qualified"] is True
    assert [phase["phase"] for phase in report["phases"]] == PHASES
    assert all(phase["ok"] and phase["detail"] is None for phase in report["phases"])
    assert report["registry"] == {"dir": str(isolated_registry), "owner_only": True, "protection": "posix_0700"}
    assert mode(isolated_registry) == 0o700
    assert report["containment"]["mechanism"] in ("cgroup_v2", "process_group")
    assert report["containment"]["abrupt_cleanup"] == "direct_child_only"
    control = report["control"]
    assert control["inspected_members"] >= 1 and control["cancel_acknowledged"] is True
    assert (control["terminal_exit_code"], control["terminal_source"]) == (108, "control_cancel")
    assert not os.path.exists(control["endpoint"]) and not os.path.exists(os.path.dirname(control["endpoint"]))
    cleanup = report["cleanup"]
    assert cleanup["confirmed_empty"] and cleanup["registry_record_removed"] and cleanup["endpoint_released"]
    assert cleanup["scratch_removed"] and report["diagnostics_dir"] is None
    assert list(scratch_tmp.iterdir()) == [] and listed() == []


def test_a_launch_past_its_budget_names_its_evidence_in_the_reference_words(scratch_tmp):
    """As the reference's doctor test: a budget spent before the launch fails that phase,
    naming the budget, and the scratch run's output is named in backticks (``... is in `DIR```),
    the directory kept as the report's diagnostics."""
    report = doctor("--timeout", "1ms", expect=116)
    assert [phase["phase"] for phase in report["phases"]] == ["registry", "launch"]
    detail = report["phases"][1]["detail"]
    assert "budget" in detail and detail.endswith(f"; the scratch run's output is in `{report['diagnostics_dir']}`")


def test_doctor_speaks_to_people_too(scratch_tmp):
    proc = run_cli("doctor")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout.decode()
    assert text.startswith("processkit-cli ") and ": qualified (" in text.splitlines()[0]
    assert "phases:" in text and "terminal_wait" in text


def test_an_unmet_requirement_is_116_and_changes_nothing_else(scratch_tmp):
    report = doctor("--require-mechanism", "job_object", "--require-abrupt-cleanup", "whole_tree", expect=116)
    assert report["qualified"] is False and report["failures"] == []
    assert len(report["mismatches"]) == 2 and "job_object" in report["mismatches"][0]
    assert [phase["phase"] for phase in report["phases"]] == PHASES
    assert report["diagnostics_dir"] is None and list(scratch_tmp.iterdir()) == []


@pytest.mark.parametrize(
    "flag, key", [("--require-mechanism", "mechanism"), ("--require-abrupt-cleanup", "abrupt_cleanup")]
)
def test_a_requirement_takes_any_string_and_an_unknown_one_is_unqualified(scratch_tmp, flag, key):
    """Compared for exact equality, as the reference does: a value this host does not report
    (even one no host reports) is 116 host_unqualified naming both values, never a usage error."""
    proc = run_cli("--error-format", "json", "doctor", "--json", flag, "teleport")
    assert proc.returncode == 116, proc.stderr
    report = json_out(proc)
    check_schema("doctor", report)
    observed = report["containment"][key]
    what = (
        "containment mechanism `teleport`, but this host selected"
        if key == "mechanism"
        else ("abrupt-cleanup level `teleport`, but this host reports")
    )
    assert report["mismatches"] == [f"requires {what} `{observed}`"]
    problem = envelope(proc)
    assert problem["kind"] == "host_unqualified" and "`teleport`" in problem["message"]
    assert f"`{observed}`" in problem["message"]
    matching = run_cli("doctor", "--json", flag, observed)
    assert matching.returncode == 0, matching.stderr


def test_a_failed_phase_keeps_a_fresh_private_diagnostics_directory(tmp_path, monkeypatch, scratch_tmp):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("PROCESSKIT_CLI_REGISTRY_DIR", str(blocker / "runs"))
    report = doctor(expect=116)
    assert [(p["phase"], p["ok"]) for p in report["phases"]] == [("registry", False)]
    assert report["failures"] == [report["phases"][0]["detail"]] and report["registry"] is None
    kept = report["diagnostics_dir"]
    assert os.path.dirname(kept) == str(scratch_tmp)
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o700
    assert json.loads((scratch_tmp / os.path.basename(kept) / "doctor-report.json").read_text()) == report


def test_the_resource_controller_check(scratch_tmp):
    report = doctor("--check-resource-controller", expect=0)
    facts = report["resource_controller"]
    assert facts["requested"] == "--max-processes 64"
    assert report["phases"][-1]["phase"] == "resource_controller" and report["phases"][-1]["ok"]
    required = run_cli("doctor", "--check-resource-controller", "--require-resource-controller")
    assert required.returncode == (0 if facts["available"] else 116)


def test_a_host_without_a_resource_controller_says_so(tmp_path, monkeypatch, scratch_tmp):
    monkeypatch.setenv("PROCESSKIT_CGROUP_PARENT", str(tmp_path / "no-cgroup2"))
    monkeypatch.setenv("PROCESSKIT_CGROUP_V1_ROOT", str(tmp_path / "no-cgroup1"))
    report = doctor("--check-resource-controller", "--require-resource-controller", expect=116)
    facts = report["resource_controller"]
    assert facts["available"] is False and "processes" in facts["detail"]
    assert report["failures"] == [] and len(report["mismatches"]) == 1
    # without a cgroup the scratch run falls back to a process group, whose post-kill
    # snapshot cannot tell a survivor from an unreaped child
    assert report["containment"]["mechanism"] == "process_group"
    assert report["cleanup"]["teardown_snapshot_conclusive"] is False


@pytest.mark.parametrize(
    "args, code",
    [
        (("--scratch-child", "50ms"), 0),
        (("--scratch-child", "50ms", "--json"), 100),
        (("--scratch-child", "0"), 100),
        (("--require-resource-controller",), 100),
    ],
)
def test_doctor_flag_rules(args, code):
    proc = run_cli("doctor", *args)
    assert proc.returncode == code, proc.stderr
    assert proc.stdout == b""
