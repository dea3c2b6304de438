"""A capture cut under ``--capture-overflow cancel`` that did not end the run is said on stderr,
as under ``truncate`` (docs/differences.md): only the stream whose cut ended the run (113) is
left to that ending's own line."""

from __future__ import annotations

import os
import signal

from conftest import start_cli, wait_for_event, wait_for_file
from streams import check_stream, one, python_child, run_checked, wait_until

CANCEL_AT_10 = ("--capture-max-bytes", "10", "--capture-overflow", "cancel")


def _cut(cap_dir, name: str, seen: int) -> bytes:
    return (
        f"processkit-cli: warning: {name}'s capture was cut at --capture-max-bytes: {cap_dir / f'{name}.log'} "
        f"holds 10 of its {seen} bytes\n"
    ).encode()


def test_a_cut_the_childs_exit_beat_to_the_ending_is_said(tmp_path, pump_backend):
    """The child writes past the cap and exits while the runner is stopped: on its next turn the
    exit and the overflow are both ready and the exit wins (docs/run.md §1.3), exit 0. The file holds
    10 of 11 bytes and, before, nothing on stderr said so."""
    cap_dir, jsonl, ready, go = tmp_path / "cap", tmp_path / "run.jsonl", tmp_path / "ready", tmp_path / "go"
    script = f"touch {ready}; while [ ! -e {go} ]; do sleep 0.01; done; head -c 11 /dev/zero"
    proc = start_cli("run", "--jsonl", jsonl, "--capture-dir", cap_dir, *CANCEL_AT_10, "--", "sh", "-c", script)
    try:
        wait_for_file(ready, timeout=60)
        root = wait_for_event(jsonl, "run_started", timeout=60)["root_pid"]
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            go.touch()
            wait_until(lambda: open(f"/proc/{root}/stat").read().rsplit(") ", 1)[1][0] == "Z", 60, "the root's exit")
        finally:
            os.kill(proc.pid, signal.SIGCONT)
    finally:
        go.touch()  # a wait that failed before it leaves no child looping for ever, nor its runner
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out == b"\0" * 11
    events = check_stream(jsonl, 0)
    assert one(events, "output_captured")["stdout"]["truncated"]
    assert err == _cut(cap_dir, "stdout", 11)


def test_the_other_streams_cut_is_said_beside_the_overflow_that_ended_the_run(tmp_path, pump_backend):
    """stdout's cut ends the run (113, its own line says so); stderr, cut in the grace the stop
    gave, is said in a warning before that line, which stays the last."""
    cap_dir = tmp_path / "cap"
    code = (
        "import os, signal, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: (os.write(2, b'e' * 12), os._exit(0)))\n"
        "os.write(1, b'o' * 11)\n"
        "time.sleep(120)\n"
    )
    args = ("--capture-dir", cap_dir, *CANCEL_AT_10, "--grace", "60s")
    proc, events = run_checked(tmp_path, *args, command=python_child(code), returncode=113)
    assert one(events, "output_overflow")["stream"] == "stdout"
    captured = one(events, "output_captured")
    assert captured["stdout"]["truncated"] and captured["stderr"]["truncated"]
    lines = proc.stderr.split(b"\n")
    assert proc.stderr.startswith(b"e" * 12 + b"\n" + _cut(cap_dir, "stderr", 12))
    assert lines[-2].startswith(b"processkit-cli: run output exceeded the 10-byte capture ceiling on stdout")
    assert len([line for line in lines if b"processkit-cli:" in line]) == 2
