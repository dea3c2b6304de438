"""Bad input (issue 23): values too long for Python's int conversion, and what may reach stderr
under ``--error-format json``."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import SAFETY_NET, cli_command, run_cli
from control_support import envelope
from processkit.grammar import values
from processkit.errors import Failure
from processkit.spec import U32_MAX, U64_MAX
from streams import check_stream, stderr_lines

HUGE = "9" * 5000  # past Python's 4,300-digit int-string limit


# -- numbers of any length ----------------------------------------------------------------------
def _exact(digits: str) -> int:
    """The value of ``digits`` with the int-string limit lifted for the test."""
    previous = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return int(digits)
    finally:
        sys.set_int_max_str_digits(previous)


long_digits = st.builds(
    lambda zeros, digits: "0" * zeros + digits,
    st.integers(0, 6000),
    st.text(alphabet="0123456789", min_size=1, max_size=6000),
)


@settings(max_examples=300, deadline=None)
@given(long_digits, st.sampled_from(["", "ms", "s", "m", "h"]))
@example("9" * 4301, "")
@example("0" * 5000 + "1", "ms")
@example("18446744073709551615", "ms")
@example("18446744073709551616", "ms")
def test_a_duration_of_any_length_is_its_value_or_a_usage_error(digits, unit):
    factor = {"": 1000, "ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}[unit]
    expected = _exact(digits) * factor
    try:
        got = values.parse_duration_ms(digits + unit, "--grace", positive=False)
    except Failure as failure:
        assert failure.code == 100 and expected > U64_MAX, failure.message
    else:
        assert got == expected <= U64_MAX


@settings(max_examples=300, deadline=None)
@given(long_digits, st.sampled_from(["", "b", "k", "M", "g"]))
@example("9" * 4301, "k")
def test_a_size_of_any_length_is_its_value_or_a_usage_error(digits, suffix):
    expected = _exact(digits) * {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[suffix.lower()]
    try:
        got = values.parse_size(digits + suffix, "--max-memory")
    except Failure as failure:
        assert failure.code == 100 and not 0 < expected <= U64_MAX, failure.message
    else:
        assert got == expected


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["", "+"]), long_digits)
@example("+", "0" * 5000 + "7")
def test_a_count_of_any_length_is_its_value_or_a_usage_error(sign, digits):
    expected = _exact(digits)
    try:
        got = values.parse_count(sign + digits, "--max-processes", low=1, high=U32_MAX)
    except Failure as failure:
        assert failure.code == 100 and not 1 <= expected <= U32_MAX, failure.message
    else:
        assert got == expected


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--jsonl", "{jsonl}", "--timeout", HUGE, "--", "true"],
        ["run", "--jsonl", "{jsonl}", "--max-memory", HUGE + "k", "--", "true"],
        ["run", "--jsonl", "{jsonl}", "--max-processes", HUGE, "--", "true"],
        ["run", "--jsonl", "{jsonl}", "--grace", "0" * 5000 + "1s", "--timeout", HUGE + "ms", "--", "true"],
        ["wait", "--run-id", "r1", "--timeout", HUGE],
        ["probe", "--json", "--require-schema-version", HUGE],
        ["batch", "-", "--jobs", HUGE],
        ["bench", "--parameter-scan", "n", "0", HUGE, "--", "true"],
        ["--error-format", HUGE, "list"],
    ],
    ids=[
        "timeout",
        "max-memory",
        "max-processes",
        "leading-zeros",
        "wait-timeout",
        "probe-schema-version",
        "batch-jobs",
        "bench-scan",
        "error-format",
    ],
)
def test_a_value_past_the_int_string_limit_is_a_usage_error(tmp_path, args):
    """... and its message quotes the value cut, saying its length, never all 5,000 digits."""
    jsonl = tmp_path / "run.jsonl"
    proc = run_cli(*[str(jsonl) if arg == "{jsonl}" else arg for arg in args])
    assert proc.returncode == 100, proc.stderr[-300:]
    assert b"internal error" not in proc.stderr
    assert not jsonl.exists()
    assert len(proc.stderr) < 400 and b"... (500" in proc.stderr and b" characters)" in proc.stderr, proc.stderr[:400]


def test_an_api_keyword_past_the_int_string_limit_is_a_value_error():
    from processkit import api

    for keyword, words in (
        ("timeout", "duration is too large"),
        ("max_memory", "size is too large"),
        ("max_processes", "expected a whole number from 1 to"),  # the count grammar's words, as run's
    ):
        with pytest.raises(ValueError, match=rf"invalid value \(an int of 16610 bits\) for '{keyword}=': {words}"):
            api.run(["true"], **{keyword: 10**5000})
    for seconds in (1e308, 1e30):  # a float whose milliseconds overflow, and one past u64
        with pytest.raises(ValueError, match="too large"):
            api.run(["true"], timeout=seconds)


# -- the environment's knobs -----------------------------------------------------------------------


@pytest.mark.parametrize("variable", ["PROCESSKIT_LATE_PUBLICATION_MS", "PROCESSKIT_STDIN_WINDOW_MS"])
def test_a_knob_of_thousands_of_digits_in_the_environment_is_no_setting(tmp_path, variable):
    """A ``PROCESSKIT_*`` knob a hostile environment sets past the int-string limit is ignored,
    as a value that is not a number is: the run goes on (it was an internal error, 104)."""
    jsonl = tmp_path / "run.jsonl"
    proc = run_cli("run", "--jsonl", jsonl, input=b'["true"]', stdin=None, env={**os.environ, variable: HUGE})
    assert proc.returncode == 0, proc.stderr[-300:]
    assert b"internal error" not in proc.stderr
    check_stream(jsonl)


def test_the_api_runs_with_a_knob_of_thousands_of_digits_in_the_environment():
    """``PROCESSKIT_LATE_PUBLICATION_MS`` is read when the API's run machinery is imported: a
    value past the int-string limit there was a ValueError out of the first ``processkit.run``."""
    script = "import processkit; print(processkit.run(['true']).returncode)"
    env = {**os.environ, "PROCESSKIT_LATE_PUBLICATION_MS": HUGE}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, env=env, timeout=SAFETY_NET)
    assert (done.returncode, done.stdout) == (0, b"0\n"), done.stderr[-300:]


# -- --error-format json: the envelope and nothing else -----------------------------------------
RUNNER_EXIT = '{"schema_version":1,"time":"2026-01-01T00:00:00.000Z","event":"runner_exit","code":0,"source":"child_exit","child_code":0}'


def test_events_validate_writes_no_stream_note_before_the_envelope(tmp_path):
    """Two runner_exits (a stream-level problem, a note in human mode) and a line that is not
    JSON (114): stderr is the envelope alone; the report stays on stdout."""
    stream = tmp_path / "bad.jsonl"
    stream.write_text(f"{RUNNER_EXIT}\n{RUNNER_EXIT}\nnot json\n")
    human = run_cli("events", "--validate", "--file", stream)
    assert b"processkit-cli: note: stream:" in human.stderr  # what JSON mode must hold back
    proc = run_cli("--error-format", "json", "events", "--validate", "--file", stream)
    assert proc.returncode == 114
    assert envelope(proc)["kind"] == "events_invalid"
    assert proc.stdout == human.stdout


def test_events_rendering_writes_no_line_notices_in_json_mode(tmp_path):
    stream = tmp_path / "bad.jsonl"
    stream.write_text(f"not json\n{RUNNER_EXIT}\n")
    assert b"line 1" in run_cli("events", "--file", stream).stderr
    for args in (["events", "--file", stream], ["events", "--json", "--file", stream]):
        proc = run_cli("--error-format", "json", *args)
        assert (proc.returncode, proc.stderr) == (0, b""), args


def test_a_run_that_warns_then_fails_writes_only_the_envelope(tmp_path, monkeypatch):
    """An unusable registry is a warning, a missing program a failure: one envelope line."""
    blocked = tmp_path / "not_a_directory"
    blocked.write_text("")
    monkeypatch.setenv("PROCESSKIT_CLI_REGISTRY_DIR", str(blocked))
    jsonl, program = tmp_path / "run.jsonl", str(tmp_path / "missing")
    assert b"warning" in run_cli("run", "--jsonl", jsonl, "--", program).stderr
    proc = run_cli("--error-format", "json", "run", "--jsonl", jsonl, "--", program)
    assert proc.returncode == 101
    assert envelope(proc)["kind"] == "spawn_error"


# -- env files are bounded, whatever they are -------------------------------------------------
def _cap_memory() -> None:
    """An unbounded read must fail fast in the test, not take the machine's memory."""
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def test_an_endless_env_file_is_refused_after_its_bound(tmp_path):
    """``/dev/zero`` used to be read without end (about 1 GB of memory a second)."""
    jsonl = tmp_path / "run.jsonl"
    proc = run_cli(
        "run", "--jsonl", jsonl, "--env-file", "/dev/zero", "--", "true", timeout=SAFETY_NET, preexec_fn=_cap_memory
    )
    assert proc.returncode == 111
    assert stderr_lines(proc) == [
        "processkit-cli: invalid environment file `/dev/zero`: it holds more than 1 MiB, the most it may"
    ]


@pytest.mark.parametrize("size, accepted", [(1 << 20, True), ((1 << 20) + 1, False)])
def test_an_env_file_holds_at_most_one_mebibyte(tmp_path, size, accepted):
    env_file, jsonl = tmp_path / "env", tmp_path / "run.jsonl"
    line = b"A=" + b"x" * 1021 + b"\n"  # 1 KiB a line
    body = line * (size // len(line))
    env_file.write_bytes(body + b"#" * (size - len(body)))
    proc = run_cli("run", "--jsonl", jsonl, "--env-file", env_file, "--", "true")
    assert proc.returncode == (0 if accepted else 111), proc.stderr


def test_an_env_file_may_be_a_pipe_as_from_process_substitution(tmp_path):
    """``--env-file <(producer)``: the path is /dev/fd/N, a pipe; it is read to EOF like a file."""
    jsonl, out = tmp_path / "run.jsonl", tmp_path / "out"
    read_end, write_end = os.pipe()
    os.write(write_end, b"FROM_PIPE=secret\n")
    os.close(write_end)
    try:
        proc = subprocess.run(
            cli_command()
            + ["run", "--jsonl", str(jsonl), "--env-file", f"/dev/fd/{read_end}", "--"]
            + ["sh", "-c", f'printf %s "$FROM_PIPE" > {out}'],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            pass_fds=(read_end,),
            timeout=SAFETY_NET,
        )
    finally:
        os.close(read_end)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == "secret"


def test_a_cpu_quota_too_large_for_the_kernel_is_a_limit_failure_not_104(tmp_path):
    """``1e308`` is a finite number of cores (the grammar takes it) but no quota cpu.max holds."""
    jsonl = tmp_path / "run.jsonl"
    proc = run_cli("run", "--jsonl", jsonl, "--cpu-quota", "1e308", "--", "true")
    assert proc.returncode == 102, proc.stderr
    assert "above the kernel's largest CPU quota" in proc.stderr.decode()
    assert [e["event"] for e in check_stream(jsonl, 102)] == ["limit_hit", "container_failed", "runner_exit"]
