"""The cap flags' value grammars (docs/run.md §2.1): every rejection is a usage error before anything
happens, every accepted value reaches containment, and the kernel receives the intended number.

Accepted values are proven accepted by the run getting past parsing to the cap layer, which the
test hooks then refuse (102 with ``limit_hit``), so these checks run on any host. Each flag's
cases are launched together as separate processes and collected afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import SAFETY_NET, cli_command, read_events, run_cli, start_cli, wait_for_event
from test_limits import needs, run_groups

REJECTED = {
    "--max-memory": [
        "0",
        "0k",
        "0m",
        "0G",
        "",
        "-1",
        "+1",
        "1.5m",
        " 1m",
        "1m ",
        "1 m",
        "1kb",
        "1t",
        "m",
        "1\u212a",  # the Kelvin sign folds to "k" in Unicode but is no unit here
        "\u0661",  # an Arabic-Indic digit one
        "18446744073709551616",
        "17179869184g",  # past u64 bytes
    ],
    "--max-processes": ["0", "-1", "+", "", " 1", "1 ", "1.0", "1e3", "4294967296", "\u0663", "0x10"],
    "--cpu-quota": [
        "0",
        "0.0",
        "-0",
        "-0.5",
        "",
        " 0.5",
        "0.5 ",
        ".",
        "e5",
        "1_0",
        "0,5",
        "1/2",
        "0x1",
        "inf",
        "-inf",
        "infinity",
        "nan",
        "NaN",
        "1e400",  # not finite, or overflowing to inf
        "\u0660.\u0665",  # Arabic-Indic digits: Python's float() takes them, the grammar does not
    ],
}

ACCEPTED = {
    "--max-memory": ["1", "1b", "1B", "512k", "512K", "64m", "64M", "2g", "2G", "0064m", "18446744073709551615"],
    "--max-processes": ["1", "20", "+20", "007", "4294967295"],
    "--cpu-quota": ["0.5", "1", "2.", ".25", "+0.5", "1e-1", "1E0", "0.0000001", "1e300"],
}

AXIS = {"--max-memory": "memory", "--max-processes": "processes", "--cpu-quota": "cpu"}


def run_all(tmp_path, flag: str, values: list[str]) -> dict[str, tuple[int, list[dict], bytes]]:
    """Run ``run FLAG VALUE -- true`` for every value at once; value -> (code, events, stderr)."""
    started = {}
    for index, value in enumerate(values):
        jsonl = tmp_path / f"{index}.jsonl"
        args = cli_command() + ["run", "--jsonl", str(jsonl), flag, value, "--", "true"]
        started[value] = (
            jsonl,
            subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE),
        )
    results = {}
    for value, (jsonl, process) in started.items():
        _, stderr = process.communicate(timeout=60)
        results[value] = (process.returncode, read_events(jsonl), stderr)
    return results


@pytest.fixture
def no_controller(tmp_path, monkeypatch):
    """Both test hooks at directories that do not exist: no cap can be carried."""
    monkeypatch.setenv("PROCESSKIT_CGROUP_PARENT", str(tmp_path / "no-cgroup2"))
    monkeypatch.setenv("PROCESSKIT_CGROUP_V1_ROOT", str(tmp_path / "no-cgroup1"))


@pytest.mark.parametrize("flag", sorted(REJECTED))
def test_rejected_values_are_usage_errors(tmp_path, no_controller, flag):
    results = run_all(tmp_path, flag, REJECTED[flag])
    wrong = {value: code for value, (code, _, _) in results.items() if code != 100}
    assert not wrong, f"not rejected with 100: {wrong}"
    for value, (_, events, stderr) in results.items():
        assert events == [], value  # parse errors come before the event stream exists
        assert flag.encode() in stderr, value


@pytest.mark.parametrize("flag", sorted(ACCEPTED))
def test_accepted_values_reach_the_cap_layer(tmp_path, no_controller, flag):
    results = run_all(tmp_path, flag, ACCEPTED[flag])
    wrong = {value: (code, stderr) for value, (code, _, stderr) in results.items() if code != 102}
    assert not wrong, f"not accepted: {wrong}"
    for value, (_, events, _) in results.items():
        assert [e["event"] for e in events] == ["limit_hit", "container_failed", "runner_exit"], value
        assert events[0]["limit"] == AXIS[flag], value


def test_a_cap_flag_given_twice_is_a_usage_error(tmp_path):
    result = run_cli("run", "--jsonl", tmp_path / "e.jsonl", "--max-memory", "1m", "--max-memory", "2m", "--", "true")
    assert result.returncode == 100
    assert not (tmp_path / "e.jsonl").exists()


CAP_FILES = ("memory.limit_in_bytes", "pids.max", "cpu.cfs_quota_us", "cpu.cfs_period_us", "memory.max", "cpu.max")


@needs("memory", "pids", "cpu")
@pytest.mark.parametrize(
    "args, v1, v2",
    [
        (["--max-memory", "64m"], {"memory.limit_in_bytes": "67108864"}, {"memory.max": "67108864"}),
        (["--max-memory", "1G"], {"memory.limit_in_bytes": "1073741824"}, {"memory.max": "1073741824"}),
        (["--max-processes", "+20"], {"pids.max": "20"}, {"pids.max": "20"}),
        # past the kernel's pid ceiling, which already holds any tree below it
        (["--max-processes", "4294967295"], {"pids.max": "4194304"}, {"pids.max": "4194304"}),
        (
            ["--cpu-quota", ".25"],
            {"cpu.cfs_quota_us": "25000", "cpu.cfs_period_us": "100000"},
            {"cpu.max": "25000 100000"},
        ),
        # below 1 ms per 100 ms period: the period grows so the quota stays exact
        (
            ["--cpu-quota", "0.002"],
            {"cpu.cfs_quota_us": "2000", "cpu.cfs_period_us": "1000000"},
            {"cpu.max": "2000 1000000"},
        ),
    ],
    ids=["64m", "1G", "+20", "u32_max", ".25", "0.002"],
)
def test_the_kernel_receives_the_parsed_value(tmp_path, args, v1, v2):
    """Read straight from the run's groups while it runs (v1 files or the v2 group's)."""
    jsonl = tmp_path / "events.jsonl"
    runner = start_cli("run", "--jsonl", jsonl, *args, "--", "sleep", "30")
    try:
        wait_for_event(jsonl, "run_started")
        found = {}
        for group in run_groups(runner.pid):
            for name in CAP_FILES:
                if os.path.exists(os.path.join(group, name)):
                    found.setdefault(name, Path(group, name).read_text().strip())
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(SAFETY_NET) == 107
    finally:
        runner.kill()
        runner.wait()
    assert v1.items() <= found.items() or v2.items() <= found.items(), found
