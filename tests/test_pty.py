"""``run --pty``: the child on a pseudo-terminal of its own, with capture, echo, the idle clock,
deadlines, the control plane and teardown kept. The runner's caller here has no terminal (stdin
is /dev/null, stdout and stderr are pipes); tests/test_pty_terminal.py drives a real one."""

from __future__ import annotations

import hashlib
import json
import textwrap

import pytest

from conftest import SAFETY_NET, pid_alive, run_cli
from control_support import runs  # noqa: F401
from streams import check_stream, one, python_child, run_checked, seconds_between, stderr_lines, wait_until

# What the child sees, as JSON in argv[1].
FACTS = textwrap.dedent(
    """
    import json, os, sys
    facts = {
        "ttys": [os.isatty(fd) for fd in (0, 1, 2)],
        "same_terminal": len({os.ttyname(fd) for fd in (0, 1, 2)}) == 1,
        "size": list(os.get_terminal_size(0)),
        "term": os.environ.get("TERM"),
        "session_leader": os.getsid(0) == os.getpid(),
        "group_leader": os.getpgrp() == os.getpid(),
        "foreground": os.tcgetpgrp(0) == os.getpgrp(),
    }
    with open(sys.argv[1], "w") as handle:
        json.dump(facts, handle)
    """
)

COLOUR_LINES = 2000
COLOUR = textwrap.dedent(
    f"""
    import sys
    for n in range({COLOUR_LINES}):
        sys.stdout.write(f"\\x1b[1;3{{n % 8}}m{{n:05d}}\\x1b[0m progress\\n")
        sys.stderr.write("\\x1b[33mwarning\\x1b[0m\\n")
    """
)


def expected_colour() -> bytes:
    """The terminal's image of COLOUR: both streams interleaved, each line end as \\r\\n."""
    out = b""
    for n in range(COLOUR_LINES):
        out += f"\x1b[1;3{n % 8}m{n:05d}\x1b[0m progress\r\n".encode() + b"\x1b[33mwarning\x1b[0m\r\n"
    return out


def test_child_sees_one_terminal_on_all_three_fds_at_the_requested_size(tmp_path, spawn_backend):
    report = tmp_path / "facts.json"
    run_checked(
        tmp_path,
        "--pty",
        "--pty-size",
        "132x43",
        "--env-remove",
        "TERM",
        command=python_child(FACTS) + [str(report)],
        returncode=0,
    )
    facts = json.loads(report.read_text())
    assert facts == {
        "ttys": [True, True, True],
        "same_terminal": True,
        "size": [132, 43],
        "term": "xterm-256color",
        "session_leader": True,
        "group_leader": True,
        "foreground": True,
    }


def test_default_size_is_80x24_and_an_existing_term_is_kept(tmp_path, spawn_backend):
    report = tmp_path / "facts.json"
    run_checked(tmp_path, "--pty", "--env", "TERM=vt100", command=python_child(FACTS) + [str(report)], returncode=0)
    facts = json.loads(report.read_text())
    assert (facts["size"], facts["term"]) == ([80, 24], "vt100")


def test_colour_output_is_byte_identical_in_echo_and_capture(tmp_path, pump_backend):
    capture = tmp_path / "capture"
    proc, events = run_checked(tmp_path, "--pty", "--capture-dir", capture, command=python_child(COLOUR), returncode=0)
    expected = expected_colour()
    assert proc.stdout == expected  # stderr went through the terminal too, in order
    assert proc.stderr == b""
    assert (capture / "stdout.log").read_bytes() == expected
    assert (capture / "stderr.log").read_bytes() == b""
    captured = one(events, "output_captured")
    assert captured["stdout"]["bytes_seen"] == captured["stdout"]["bytes_written"] == len(expected)
    assert captured["stdout"]["sha256"] == hashlib.sha256(expected).hexdigest()
    assert captured["stderr"] == {
        "path": str(capture / "stderr.log"),
        "bytes": 0,
        "bytes_seen": 0,
        "bytes_written": 0,
        "sha256": hashlib.sha256(b"").hexdigest(),
        "truncated": False,
        "write_error": False,
    }


def test_no_echo_and_the_capture_cap_work_as_in_the_default_mode(tmp_path):
    capture = tmp_path / "capture"
    proc, events = run_checked(
        tmp_path,
        "--pty",
        "--no-echo",
        "--capture-dir",
        capture,
        "--capture-max-bytes",
        "1k",
        command=python_child(COLOUR),
        returncode=0,
    )
    assert proc.stdout == b""
    assert (capture / "stdout.log").read_bytes() == expected_colour()[:1024]
    stdout = one(events, "output_captured")["stdout"]
    assert (stdout["bytes_seen"], stdout["bytes_written"], stdout["truncated"]) == (len(expected_colour()), 1024, True)


def test_overflow_cancel_fires_on_terminal_output(tmp_path):
    _, events = run_checked(
        tmp_path,
        "--pty",
        "--no-echo",
        "--capture-dir",
        tmp_path / "c",
        "--capture-max-bytes",
        "1k",
        "--capture-overflow",
        "cancel",
        command=python_child(COLOUR + "import time; time.sleep(60)"),
        returncode=113,
    )
    assert one(events, "output_overflow")["stream"] == "stdout"


def test_idle_timeout_fires_while_the_child_waits_for_input_that_never_comes(tmp_path):
    """Without a caller terminal or --stdin-file the terminal gets no input (and no EOF). A shell
    child, whose prompt comes at once: the idle window runs from the spawn, and an interpreter's
    start-up on a loaded machine took more than half of its 500 ms."""
    child = "printf 'prompt? \\n'; read answer; echo never"
    proc, events = run_checked(
        tmp_path, "--pty", "--idle-timeout", "500ms", command=["sh", "-c", child], returncode=106
    )
    assert one(events, "timeout")["reason"] == "idle"
    assert proc.stdout == b"prompt? \r\n"


def test_overall_timeout_fires_while_the_child_keeps_talking(tmp_path):
    child = "import time\nwhile True:\n    print('tick', flush=True)\n    time.sleep(0.05)"
    _, events = run_checked(
        tmp_path, "--pty", "--timeout", "800ms", "--idle-timeout", "5s", command=python_child(child), returncode=106
    )
    assert one(events, "timeout")["reason"] == "overall"


@pytest.mark.parametrize("verb, code", [("cancel", 108), ("kill", 109)])
def test_cancel_and_kill_through_the_control_plane(runs, verb, code):
    run = runs("sleep", "60", options=("--pty",))
    proc = run_cli(verb, "--run-id", run.run_id)
    assert proc.returncode == 0, proc.stderr
    assert run.finish() == code
    events = check_stream(run.jsonl, code)
    assert one(events, "cleanup_finished")["remaining"] == 0
    assert not pid_alive(run.started["root_pid"])


def test_a_grandchild_holding_the_terminal_does_not_hang_the_run(tmp_path, spawn_backend):
    """The root exits once its child holds the terminal; the child ignores the hang-up and keeps
    the slave open, so the master never reports EIO until teardown ends it. (The root waits for
    the child's word, not 0.5 s: an interpreter's start-up on a loaded machine took longer, and
    the teardown then killed the child before it had said anything.)"""
    pid_file, holder = tmp_path / "grandchild.pid", tmp_path / "holder.py"
    holder.write_text(
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "print('holding', flush=True)\n"
        "open(sys.argv[1] + '.part', 'w').write(str(os.getpid()))\n"
        "os.rename(sys.argv[1] + '.part', sys.argv[1])\n"
        "time.sleep(60)\n"
    )
    child = (
        "import os, subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, {str(holder)!r}, {str(pid_file)!r}], stdout=sys.stdout).stdout = None\n"
        f"while not os.path.exists({str(pid_file)!r}): time.sleep(0.01)\n"
    )
    proc, events = run_checked(
        tmp_path,
        "--pty",
        "--capture-dir",
        tmp_path / "c",
        command=python_child(child),
        returncode=0,
        timeout=SAFETY_NET,
    )
    assert b"holding" in proc.stdout
    finished = one(events, "cleanup_finished")
    assert finished["remaining"] == 0
    assert not pid_alive(int(pid_file.read_text()))
    # The hang-up came with the teardown, not from the drain's 2 s bound on a terminal left open.
    assert seconds_between(events, "cleanup_finished", "output_captured") < 1.9


@pytest.mark.parametrize("text", [b"first line\nsecond line\n", b"no line end at the end", b""])
def test_stdin_file_reaches_the_child_then_end_of_file(tmp_path, spawn_backend, text):
    source = tmp_path / "input.txt"
    source.write_bytes(text)
    received = tmp_path / "received.bin"
    child = f"import sys; data = sys.stdin.buffer.read(); open({str(received)!r}, 'wb').write(data)"
    run_checked(
        tmp_path, "--pty", "--stdin-file", source, "--timeout", "20s", command=python_child(child), returncode=0
    )
    assert received.read_bytes() == text


def test_stdin_file_larger_than_the_terminal_buffers(tmp_path):
    """Many lines, fed as the child reads them: nothing is lost, then EOF."""
    lines = [f"{n:06d} {'x' * 100}\n".encode() for n in range(3000)]
    source = tmp_path / "input.txt"
    source.write_bytes(b"".join(lines))
    digest = tmp_path / "digest.txt"
    child = (
        "import hashlib, sys\n"
        "data = sys.stdin.buffer.read()\n"
        f"open({str(digest)!r}, 'w').write(hashlib.sha256(data).hexdigest())\n"
    )
    run_checked(
        tmp_path,
        "--pty",
        "--no-echo",
        "--stdin-file",
        source,
        "--timeout",
        "30s",
        command=python_child(child),
        returncode=0,
    )
    assert digest.read_text() == hashlib.sha256(b"".join(lines)).hexdigest()


def test_detached_pty_run_keeps_its_capture(tmp_path):
    capture = tmp_path / "capture"
    jsonl = tmp_path / "run.jsonl"
    proc = run_cli(
        "run",
        "--detach",
        "--pty",
        "--jsonl",
        jsonl,
        "--capture-dir",
        capture,
        "--",
        *python_child("import os; print(os.isatty(1), os.get_terminal_size(1).columns)"),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b""
    assert wait_until(lambda: b'"runner_exit"' in jsonl.read_bytes(), 60)
    check_stream(jsonl, 0)
    assert (capture / "stdout.log").read_bytes() == b"True 80\r\n"


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--pty", "--inherit-stdio"], "the argument '--pty' cannot be used with '--inherit-stdio'"),
        (["--inherit-stdin", "--pty"], "the argument '--pty' cannot be used with '--inherit-stdin'"),
        (["--pty-size", "80x24"], "the argument '--pty-size' requires '--pty'"),
        (["--pty", "--pty-size", "80"], "invalid value '80' for '--pty-size'"),
        (["--pty", "--pty-size", "0x24"], "invalid value '0x24' for '--pty-size'"),
        (["--pty", "--pty-size", "80x65536"], "invalid value '80x65536' for '--pty-size'"),
        (["--pty", "--pty-size", "80X24"], "invalid value '80X24' for '--pty-size'"),
        (["--pty", "--pty-size", " 80x24"], "invalid value ' 80x24' for '--pty-size'"),
        (["--pty", "--pty", "--pty-size", "80x24"], "'--pty' cannot be used multiple times"),
    ],
)
def test_usage_errors(tmp_path, flags, message):
    jsonl = tmp_path / "run.jsonl"
    proc = run_cli("run", *flags, "--jsonl", jsonl, "--", "true")
    assert proc.returncode == 100
    lines = stderr_lines(proc)  # one line, and for a parse error the usage hint after it
    assert lines[0].startswith("processkit-cli: ") and message in lines[0], lines
    assert len(lines) == 1 or lines[1].startswith("usage: "), lines
    assert not jsonl.exists()


def test_probe_reports_the_flags():
    proc = run_cli("probe", "--json", "--require-surface", "run:--pty", "--require-surface", "run:--pty-size")
    assert proc.returncode == 0, proc.stdout


def test_a_child_crash_is_its_own_exit(tmp_path):
    child = "import os, signal; print('boom', flush=True); os.kill(os.getpid(), signal.SIGSEGV)"
    proc, events = run_checked(tmp_path, "--pty", command=python_child(child), returncode=139)
    assert proc.stdout == b"boom\r\n"
    exited = one(events, "root_exited")
    assert (exited["outcome"], exited["signal"]) == ("signalled", 11)
