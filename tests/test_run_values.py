"""The value grammars of docs/run.md §2.1/§2.4 and parse-time rejections: every error exits 100
before anything runs (no child, no JSONL file)."""

from __future__ import annotations

import pytest

from conftest import run_cli
from streams import by_name, one, python_child, run_checked, stderr_lines

U64_OVERFLOW = str(2**64)


def assert_usage_error(tmp_path, *args, fragment: str = ""):
    """``run ARGS`` is refused with 100; the child never ran and no stream was opened."""
    marker, jsonl = tmp_path / "child-ran", tmp_path / "run.jsonl"
    proc = run_cli("run", "--jsonl", jsonl, *args, "--", "touch", marker)
    assert proc.returncode == 100, (args, proc.returncode, proc.stderr)
    assert not marker.exists() and not jsonl.exists()
    assert b"Traceback" not in proc.stderr
    assert stderr_lines(proc)[0].startswith("processkit-cli: ")
    assert fragment in proc.stderr.decode(), proc.stderr
    return proc


@pytest.mark.parametrize(
    "value",
    [
        "",
        " 1",
        "1 ",
        "+1",
        "-1",
        "1.5s",
        "1S",
        "1sec",
        "1d",
        "ms",
        "1_000",
        "\uff11",
        f"{2**64 // 1000 + 1}s",
        f"{U64_OVERFLOW}ms",
    ],
)
def test_bad_durations_are_usage_errors(tmp_path, value):
    assert_usage_error(tmp_path, "--grace", value, fragment="--grace")


@pytest.mark.parametrize("flag", ["--timeout", "--idle-timeout", "--snapshot-interval"])
@pytest.mark.parametrize("zero", ["0", "0ms", "0s", "00m", "0h"])
def test_positive_durations_reject_zero(tmp_path, flag, zero):
    assert_usage_error(tmp_path, flag, zero, fragment=flag)


@pytest.mark.parametrize(
    "value, ms", [("0", 0), ("007", 7000), ("250ms", 250), ("2s", 2000), ("5m", 300_000), ("1h", 3_600_000)]
)
def test_duration_values_and_units(tmp_path, value, ms):
    """A bare number is seconds; ``--grace 0`` is allowed. The parsed value shows in grace_ms."""
    _, events = run_checked(tmp_path, "--grace", value, "--timeout", "10ms", command=["sleep", "30"], returncode=106)
    assert one(events, "timeout")["grace_ms"] == ms


def test_long_positive_durations_are_accepted(tmp_path):
    args = ("--timeout", "1h", "--idle-timeout", "90m", "--snapshot-interval", "3600s")
    run_checked(tmp_path, *args, command=["true"], returncode=0)


@pytest.mark.parametrize(
    "value", ["0", "0k", "-1", "+1", "1.5k", " 1", "1kb", "1t", "", "k", U64_OVERFLOW, f"{2**34}g"]
)
def test_bad_sizes_are_usage_errors(tmp_path, value):
    assert_usage_error(
        tmp_path, "--capture-dir", tmp_path / "cap", "--capture-max-bytes", value, fragment="--capture-max-bytes"
    )


@pytest.mark.parametrize("value, cap", [("1", 1), ("7b", 7), ("7B", 7), ("2k", 2048), ("1K", 1024), ("1m", 2**20)])
def test_size_values_and_suffixes(tmp_path, value, cap):
    """Binary units, case-insensitive; the parsed cap is where capture stops writing."""
    size = 3000
    capture = tmp_path / "cap"
    args = ("--capture-dir", capture, "--capture-max-bytes", value, "--no-echo")
    _, events = run_checked(tmp_path, *args, command=python_child(f"print('x' * {size - 1})"), returncode=0)
    stdout = one(events, "output_captured")["stdout"]
    assert (stdout["bytes_written"], stdout["truncated"]) == (min(cap, size), size > cap)
    assert (capture / "stdout.log").stat().st_size == min(cap, size)


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--max-processes", "0"),
        ("--max-processes", "-1"),
        ("--max-processes", "1.0"),
        ("--max-processes", str(2**32)),
        ("--max-memory", "0"),
        ("--max-memory", "1kb"),
        ("--cpu-quota", "0"),
        ("--cpu-quota", "-0.5"),
        ("--cpu-quota", "nan"),
        ("--cpu-quota", "inf"),
        ("--cpu-quota", "half"),
    ],
)
def test_bad_limit_values_are_usage_errors(tmp_path, flag, value):
    assert_usage_error(tmp_path, flag, value, fragment=flag)


@pytest.mark.parametrize(
    "run_id",
    ["a", "\u00e9" * 256, "build 42/#x", "\U0001f680-launch"],
    ids=["one-char", "256-scalars", "spaces-and-punctuation", "astral"],
)
def test_good_run_ids_are_used_verbatim(tmp_path, run_id):
    _, events = run_checked(tmp_path, "--run-id", run_id, command=["true"], returncode=0)
    assert one(events, "run_started")["run_id"] == run_id


@pytest.mark.parametrize(
    "run_id",
    [
        "",
        "x" * 257,
        "a\tb",
        "a\x7fb",
        "a\u0085b",
        "a\u200bb",
        "\u202eabc",
        "a\u2066b",
        "a\ufeff",
        "a\U000e0001",
        "a\U000110bd",
    ],
)
def test_bad_run_ids_are_usage_errors(tmp_path, run_id):
    assert_usage_error(tmp_path, "--run-id", run_id, fragment="--run-id")


def test_labels_last_value_wins_and_keys_are_sorted(tmp_path):
    long_value = "\u00e9" * 256
    labels = ["zeta=1", "_a.b-c=", "k=a=b", "Zeta=2", "zeta=3", f"{'k' * 64}=v", f"v={long_value}"]
    args = [arg for label in labels for arg in ("--label", label)]
    _, events = run_checked(tmp_path, *args, command=["true"], returncode=0)
    got = one(events, "run_started")["labels"]
    assert got == {"zeta": "3", "_a.b-c": "", "k": "a=b", "Zeta": "2", "k" * 64: "v", "v": long_value}
    assert list(got) == sorted(got)


@pytest.mark.parametrize(
    "label", ["k", "=v", "1k=v", "k k=v", "k\u00e9=v", f"{'k' * 65}=v", f"k={'v' * 257}", "k=a\x1bb", "k=a\u2066b"]
)
def test_bad_labels_are_usage_errors(tmp_path, label):
    assert_usage_error(tmp_path, "--label", label, fragment="label")


@pytest.mark.parametrize(
    "args",
    [
        ("--env", "=v"),
        ("--env", "A B=v"),
        ("--env", "A\u00a0B=v"),
        ("--env", "A\u2003B=v"),
        ("--env", "A\x01=v"),
        ("--env", "NOEQUALS"),
        ("--env-remove", "A=B"),
        ("--env-remove", ""),
        ("--run-id-env", "A B"),
        ("--run-id-env", ""),
    ],
)
def test_bad_env_keys_are_usage_errors(tmp_path, args):
    assert_usage_error(tmp_path, *args, fragment=args[0])


@pytest.mark.parametrize(
    "args",
    [
        ("--timeout", "1s", "--timeout", "2s"),
        ("--grace", "1s", "--grace", "1s"),
        ("--run-id", "a", "--run-id", "b"),
        ("--cwd", ".", "--cwd", "."),
        ("--jsonl", "other.jsonl"),
        ("--run-id-env", "A", "--run-id-env", "B"),
        ("--argv-raw", "--argv-raw"),
        ("--env-clear", "--env-clear"),
        ("--no-echo", "--no-echo"),
        ("--capture-dir", "a", "--capture-dir", "b"),
    ],
    ids=lambda args: args[0],
)
def test_a_non_repeatable_flag_given_twice_is_a_usage_error(tmp_path, args):
    assert_usage_error(tmp_path, *args, fragment="cannot be used multiple times")


def test_error_format_given_twice_is_a_usage_error(tmp_path):
    proc = run_cli(
        "--error-format", "json", "run", "--error-format", "human", "--jsonl", tmp_path / "r.jsonl", "--", "true"
    )
    assert proc.returncode == 100 and not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize(
    "args",
    [
        ("--inherit-stdio", "--capture-dir", "cap"),
        ("--inherit-stdio", "--idle-timeout", "1s"),
        ("--inherit-stdio", "--no-echo"),
        ("--inherit-stdio", "--inherit-stdin"),
        ("--inherit-stdin", "--stdin-file", "in"),
        ("--capture-max-bytes", "1k"),
        ("--capture-overflow", "cancel"),
        ("--capture-dir", "cap", "--capture-overflow", "stop"),
        ("--run-id-env", "RID", "--env", "RID=mine"),
        ("--bogus",),
        ("--time", "1s"),  # no abbreviations
        ("--timeout",),
    ],
)
def test_parse_time_rejections(tmp_path, args):
    assert_usage_error(tmp_path, *args)


def test_a_missing_jsonl_or_program_is_a_usage_error(tmp_path):
    marker = tmp_path / "child-ran"
    for args in (
        ("run", "--", "touch", marker),
        ("run", "--jsonl", tmp_path / "r.jsonl"),
        ("run", "--jsonl", tmp_path / "r.jsonl", "--"),
    ):
        proc = run_cli(*args)
        assert proc.returncode == 100, args
    assert not marker.exists() and not (tmp_path / "r.jsonl").exists()


def test_the_run_id_env_collision_names_the_key_not_the_value(tmp_path):
    proc = assert_usage_error(tmp_path, "--run-id-env", "RID", "--env", "RID=hunter2", fragment="RID")
    assert b"hunter2" not in proc.stderr


def test_repeatable_flags_may_repeat(tmp_path):
    env_file = tmp_path / "vars.env"
    env_file.write_text("F=1\n")
    args = (
        "--label",
        "a=1",
        "--label",
        "a=2",
        "--env",
        "X=1",
        "--env",
        "Y=2",
        "--env-remove",
        "P",
        "--env-remove",
        "Q",
    )
    args += ("--env-file", env_file, "--env-file", env_file)
    _, events = run_checked(tmp_path, *args, command=["true"], returncode=0)
    assert by_name(events, "run_started")[0]["labels"] == {"a": "2"}


@pytest.mark.parametrize("argv", [("--help",), ("run", "--help"), ("--version",), ("-V",)])
def test_help_and_version_print_to_stdout_and_exit_0(argv):
    proc = run_cli(*argv)
    assert proc.returncode == 0 and proc.stdout and proc.stderr == b""
