"""ADR 0203 (docs/adr-0203-stdin-probe.md): the stdin first-byte probe, driven through the real
CLI with real pipes and a pty."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pty
import subprocess
import time

import pytest

from conftest import SAFETY_NET, cli_command, read_events, run_cli

WINDOW = 0.25
# The window the tests that the probe does NOT wait set through PROCESSKIT_STDIN_WINDOW_MS: far
# beyond a start-up on a loaded machine (a margin of a fraction of the 250 ms window over a start-up
# measured a moment before was not), so a wait shows however loaded the machine is.
LONG_WINDOW = 15.0


def _timed(args, **kwargs) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = run_cli(*args, **kwargs)
    return result, time.monotonic() - started


@contextlib.contextmanager
def pipe_stdin(*, writer_open: bool):
    """A pipe for the CLI's stdin: its writer held open and silent (the agent's inherited pipe),
    or closed at once (empty EOF)."""
    read_end, write_end = os.pipe()
    if not writer_open:
        os.close(write_end)
    try:
        yield read_end
    finally:
        os.close(read_end)
        if writer_open:
            os.close(write_end)


@pytest.fixture
def long_window(monkeypatch) -> float:
    monkeypatch.setenv("PROCESSKIT_STDIN_WINDOW_MS", str(int(LONG_WINDOW * 1000)))
    return LONG_WINDOW


@pytest.fixture
def startup_seconds():
    """How long the CLI takes to start and exit on this machine right now (median of 3)."""
    times = sorted(_timed(["--version"])[1] for _ in range(3))
    return times[1]


def test_idle_pipe_missing_program_exits_100_within_a_second(tmp_path, startup_seconds):
    """The window and start-up (ADR 0203): well under a second beyond the start-up as measured
    now, which a loaded machine may stretch past a second by itself."""
    with pipe_stdin(writer_open=True) as stdin:
        result, elapsed = _timed(["run", "--jsonl", tmp_path / "e.jsonl"], stdin=stdin)
    assert result.returncode == 100
    assert b"program" in result.stderr
    assert elapsed < startup_seconds + 1.0
    assert not (tmp_path / "e.jsonl").exists()  # a usage error opens nothing


def test_empty_eof_does_not_wait(tmp_path, long_window):
    with pipe_stdin(writer_open=False) as stdin:
        result, elapsed = _timed(["run", "--jsonl", tmp_path / "e.jsonl"], stdin=stdin)
    assert result.returncode == 100
    assert elapsed < long_window


def test_terminal_stdin_does_not_wait(tmp_path, long_window):
    master, slave = pty.openpty()
    try:
        result, elapsed = _timed(["run", "--jsonl", tmp_path / "e.jsonl"], stdin=slave)
    finally:
        os.close(master)
        os.close(slave)
    assert result.returncode == 100
    assert elapsed < long_window


def test_idle_pipe_waits_for_the_window(tmp_path, startup_seconds):
    """The contrast to the two tests above: a silent open pipe costs the window, no more."""
    with pipe_stdin(writer_open=True) as stdin:
        result, elapsed = _timed(["run", "--jsonl", tmp_path / "e.jsonl"], stdin=stdin)
    assert result.returncode == 100
    assert elapsed >= WINDOW


def test_argv_payload_beyond_pipe_capacity_with_pauses_runs_the_full_command(tmp_path):
    # Four arguments of multi-byte text (each under the kernel's 128 KiB per-argument limit).
    pieces = ["é€😀" * 6000 + str(n) for n in range(4)]
    script = "import sys,hashlib; print(hashlib.sha256('|'.join(sys.argv[1:]).encode()).hexdigest())"
    payload = json.dumps(["python3", "-c", script, *pieces], ensure_ascii=False).encode()
    assert len(payload) > 200_000
    cut_one = payload.index("😀".encode()) + 1  # inside a four-byte character
    cut_two = len(payload) // 2 + 1
    while payload[cut_two] & 0xC0 != 0x80:  # find a continuation byte: a cut inside a character
        cut_two += 1
    proc = subprocess.Popen(
        cli_command() + ["run", "--jsonl", str(tmp_path / "e.jsonl")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    for part in (payload[:cut_one], payload[cut_one:cut_two], payload[cut_two:]):
        proc.stdin.write(part)
        proc.stdin.flush()
        time.sleep(0.4)  # the scenario itself: pauses longer than the first-byte window
    proc.stdin.close()
    proc.stdin = None  # communicate() must not touch the stdin the test already closed
    out, err = proc.communicate(timeout=SAFETY_NET)
    assert proc.returncode == 0, err
    assert out.strip().decode() == hashlib.sha256("|".join(pieces).encode()).hexdigest()
    assert read_events(tmp_path / "e.jsonl")[-1]["code"] == 0


@pytest.mark.parametrize(
    "payload, message",
    [
        (b'{"not": "a list"}', b"JSON array"),
        (b"[]", b"JSON array"),
        (b'["ok", 3]', b"JSON array"),
        (b"\xff\xfe[]", b"UTF-8"),
    ],
)
def test_bad_payloads_are_usage_errors(tmp_path, payload, message):
    result = run_cli("run", "--jsonl", tmp_path / "e.jsonl", input=payload, stdin=None)
    assert result.returncode == 100
    assert message in result.stderr
    assert b"Traceback" not in result.stderr


@pytest.mark.parametrize("flags", [["--inherit-stdin"], ["--stdin-file", "/dev/stdin"]])
def test_stdin_owned_by_the_child_is_never_probed(tmp_path, flags):
    """A payload on stdin is the child's input there, never the program: immediate usage error."""
    result = run_cli("run", "--jsonl", tmp_path / "e.jsonl", *flags, input=b'["true"]', stdin=None)
    assert result.returncode == 100
    assert not (tmp_path / "e.jsonl").exists()


def test_explicit_command_ignores_a_silent_pipe(tmp_path):
    """Explicit arguments never acquire the probe: the run starts at once."""
    with pipe_stdin(writer_open=True) as stdin:
        result = run_cli("run", "--jsonl", tmp_path / "e.jsonl", "--", "true", stdin=stdin)
    assert result.returncode == 0


def test_stdin_file_dev_stdin_gets_input_arriving_after_600ms(tmp_path):
    """A stream reader is not bound by the probe's window."""
    proc = subprocess.Popen(
        cli_command() + ["run", "--jsonl", str(tmp_path / "e.jsonl"), "--stdin-file", "/dev/stdin", "--", "cat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    time.sleep(0.6)  # the scenario: a producer that starts late
    out, err = proc.communicate(b"late input\n", timeout=SAFETY_NET)
    assert proc.returncode == 0, err
    assert out == b"late input\n"


@pytest.mark.parametrize("command", ["inspect", "cancel", "kill", "attest", "wait"])
def test_a_piped_run_id_is_used(command):
    """The run id is the first required unset field of every by-id client: stdin supplies it."""
    result = run_cli("--error-format", "json", command, input=b"  piped-run-42\n", stdin=None)
    assert result.returncode in (0, 103)  # wait returns 0 for an id with no live run
    if result.returncode == 103:
        envelope = json.loads(result.stderr.decode().splitlines()[-1])
        assert envelope["run_id"] == "piped-run-42"
        assert "piped-run-42" in envelope["message"]
        assert envelope["kind"] == "not_found"


def test_the_dash_token_is_ordinary_data():
    result = run_cli("--error-format", "json", "inspect", "--run-id", "-", input=b"other\n", stdin=None)
    assert result.returncode == 103
    assert json.loads(result.stderr.decode().splitlines()[-1])["run_id"] == "-"


@pytest.mark.parametrize("command", [["list"], ["prune", "--dry-run"]])
def test_commands_without_a_required_field_ignore_an_idle_pipe(command, long_window):
    with pipe_stdin(writer_open=True) as stdin:
        result, elapsed = _timed(command, stdin=stdin)
    assert result.returncode == 0, result.stderr
    assert elapsed < long_window


def test_missing_run_id_with_an_idle_pipe_is_a_prompt_usage_error(startup_seconds):
    with pipe_stdin(writer_open=True) as stdin:
        result, elapsed = _timed(["inspect"], stdin=stdin)
    assert result.returncode == 100
    assert b"--run-id" in result.stderr
    assert elapsed < startup_seconds + 1.0


def _small_heap() -> None:
    """The runner's heap capped (512 MiB): an unbounded probe fails here, not the machine."""
    import resource

    resource.setrlimit(resource.RLIMIT_DATA, (512 << 20, 512 << 20))


@pytest.mark.parametrize("source", ["/dev/zero", "endless pipe"])
def test_endless_input_is_refused_past_the_bound_not_held(tmp_path, source):
    """``< /dev/zero`` and ``yes |`` never reach an end of file: read to it, the probe held a
    gigabyte in seconds and never finished. Past ``PROBE_BYTES`` it is a usage error."""
    command = ["run", "--jsonl", tmp_path / "e.jsonl"]
    if source == "/dev/zero":
        with open("/dev/zero", "rb") as zero:
            result = run_cli(*command, stdin=zero, preexec_fn=_small_heap)
    else:
        writer = subprocess.Popen(["yes", '["true"]'], stdout=subprocess.PIPE)
        try:
            result = run_cli(*command, stdin=writer.stdout, preexec_fn=_small_heap)
        finally:
            writer.stdout.close()
            writer.kill()
            writer.wait()
    assert result.returncode == 100, result.stderr
    assert b"standard input is over 4 MiB" in result.stderr
    assert not (tmp_path / "e.jsonl").exists()


@pytest.mark.parametrize(
    "flags",
    [("--stdin-file", "/dev/fd/0"), ("--stdin-file", "/proc/self/fd/0"), ("--env-file", "/dev/stdin")],
)
def test_stdin_an_input_path_names_is_never_read_for_the_program(tmp_path, flags):
    """Only ``--stdin-file /dev/stdin`` kept the probe off stdin: with ``/dev/fd/0`` (or an
    ``--env-file /dev/stdin``) and no program, stdin was read for the argv, and the child got a
    used-up descriptor, the input lost without a word."""
    read_end, write_end = os.pipe()
    os.write(write_end, b'["cat"]\n')
    os.close(write_end)
    try:
        proc = run_cli("run", *flags, "--jsonl", tmp_path / "run.jsonl", stdin=read_end)
        left = os.read(read_end, 100)
    finally:
        os.close(read_end)
    assert b"a program to run is required after '--'" in proc.stderr
    assert left == b'["cat"]\n'  # the caller's input, still whole


def test_stdin_a_link_names_is_never_read_for_the_program(tmp_path):
    """Only the names ``/dev/stdin``, ``/dev/fd/0`` and ``/proc/self/fd/0`` kept the probe off
    stdin: a link to ``/dev/stdin`` had the caller's input read as the argv (``cat``), and the
    child read what was left, nothing: exit 0, the input lost."""
    read_end, write_end = os.pipe()
    os.write(write_end, b'["cat"]\n')
    os.close(write_end)
    (tmp_path / "input").symlink_to("/dev/stdin")
    try:
        proc = run_cli("run", "--stdin-file", "input", "--jsonl", tmp_path / "run.jsonl", stdin=read_end, cwd=tmp_path)
        left = os.read(read_end, 100)
    finally:
        os.close(read_end)
    assert (proc.returncode, proc.stdout) == (100, b""), proc.stderr
    assert b"a program to run is required after '--'" in proc.stderr
    assert left == b'["cat"]\n'  # the caller's input, still whole


def test_a_regular_file_redirected_and_named_is_read_for_the_program(tmp_path):
    """``--stdin-file F < F``: the child opens F again, with its own offset, so the probe reading
    fd 0 takes nothing from it; the first unset field (ADR 0203) reads its argv there, as before."""
    (tmp_path / "input").write_bytes(b'["cat"]\n')
    with open(tmp_path / "input", "rb") as stdin:
        proc = run_cli("run", "--stdin-file", "input", "--jsonl", tmp_path / "run.jsonl", stdin=stdin, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, b'["cat"]\n'), proc.stderr
