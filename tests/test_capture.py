"""Bounded capture (docs/run.md §4): byte-exact files and echo, the cap and its report, the overflow
policy, all-or-nothing setup, a write failure mid-run, and an 80 MiB line in bounded memory."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time

import pytest

from conftest import SAFETY_NET, SHORT_EXIT_DRAIN, cli_command, run_cli, start_cli
from payloads import block, child_command, line_pieces
from streams import by_name, check_stream, one, python_child, run_checked, stderr_lines

DEFAULT_CAP = 8 << 20


def assert_captured(report: dict, path, produced: bytes, cap: int = DEFAULT_CAP) -> bytes:
    """One stream's report agrees with its file and with what the child produced; returns the file.

    The file holds a prefix of the output (all of it up to the cap unless a write failed), and
    the digest is of exactly the file's bytes.
    """
    content = path.read_bytes()
    assert report["path"] == str(path)
    assert report["bytes"] == report["bytes_seen"] == len(produced)
    assert report["bytes_written"] == len(content)
    assert content == produced[: len(content)], "the file is not a byte-exact prefix of the output"
    assert report["sha256"] == hashlib.sha256(content).hexdigest()
    assert report["truncated"] == (len(produced) > cap)
    assert report["write_error"] == (len(content) < min(len(produced), cap))
    return content


# -- bytes in, bytes out -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flags, out_size, err_size",
    [([], 1_000_000, 300_000), ([], (9 << 20) + 7, 70_001), (["--no-echo"], 3 << 20, 100_000)],
    ids=["whole", "default-cap", "no-echo"],
)
def test_binary_output_is_echoed_and_captured_byte_exact(tmp_path, pump_backend, flags, out_size, err_size):
    cap_dir = tmp_path / "cap"
    out, err = block(1, out_size), block(2, err_size)
    command = child_command(f"p.interleave(p.block(1, {out_size}), p.block(2, {err_size}))")
    proc, events = run_checked(tmp_path, "--capture-dir", cap_dir, *flags, command=command, returncode=0)
    echoed = "--no-echo" not in flags
    assert proc.stdout == (out if echoed else b"")
    cut = (
        f"processkit-cli: warning: stdout's capture was cut at --capture-max-bytes: {cap_dir / 'stdout.log'} "
        f"holds {DEFAULT_CAP} of its {out_size} bytes\n".encode()
        if out_size > DEFAULT_CAP
        else b""
    )
    # The warning starts a line of its own after an echoed stderr whose last byte is no newline.
    opened = b"\n" if cut and echoed and err and not err.endswith(b"\n") else b""
    assert proc.stderr == (err if echoed else b"") + opened + cut
    report = one(events, "output_captured")
    assert assert_captured(report["stdout"], cap_dir / "stdout.log", out) == out[:DEFAULT_CAP]
    assert assert_captured(report["stderr"], cap_dir / "stderr.log", err) == err


@pytest.mark.parametrize("size, cap", [(0, 16), (16, 16), (17, 16), (5000, 1024)])
def test_output_captured_reports_each_stream(tmp_path, pump_backend, size, cap):
    cap_dir = tmp_path / "cap"
    code = f"import os; os.write(1, b'o' * {size}); os.write(2, b'e' * {size // 2})"
    args = ("--capture-dir", cap_dir, "--capture-max-bytes", str(cap))
    proc, events = run_checked(tmp_path, *args, command=python_child(code), returncode=0)
    report = one(events, "output_captured")
    for name, produced in (("stdout", b"o" * size), ("stderr", b"e" * (size // 2))):
        assert assert_captured(report[name], cap_dir / f"{name}.log", produced, cap) == produced[:cap]
    assert proc.stdout == b"o" * size, "the echo is never capped"


# -- the overflow policy -------------------------------------------------------------------------


def test_output_exactly_at_the_cap_is_complete_not_an_overflow(tmp_path, pump_backend):
    cap_dir = tmp_path / "cap"
    command = child_command("p.interleave(p.block(1, 4096), p.block(2, 4096))")
    args = ("--capture-dir", cap_dir, "--capture-max-bytes", "4k", "--capture-overflow", "cancel")
    _, events = run_checked(tmp_path, *args, command=command, returncode=0)
    assert one(events, "root_exited")["code"] == 0
    report = one(events, "output_captured")
    for name, seed in (("stdout", 1), ("stderr", 2)):
        assert assert_captured(report[name], cap_dir / f"{name}.log", block(seed, 4096), 4096) == block(seed, 4096)


@pytest.mark.parametrize("stream, fd", [("stdout", 1), ("stderr", 2)])
def test_overflow_cancel_tears_the_run_down_with_113(tmp_path, pump_backend, stream, fd):
    cap_dir = tmp_path / "cap"
    cap = 1 << 20
    args = ("--capture-dir", cap_dir, "--capture-max-bytes", "1m", "--capture-overflow", "cancel")
    proc, events = run_checked(tmp_path, *args, command=child_command(f"p.endless({fd})"), returncode=113)
    overflow = one(events, "output_overflow")
    assert (overflow["stream"], overflow["max_bytes"], overflow["grace_ms"]) == (stream, cap, None)
    assert (events[-1]["source"], events[-1]["child_code"]) == ("output_overflow", None)
    assert one(events, "cleanup_finished")["soft_terminate"] == "signalled"
    assert not by_name(events, "root_exited")
    report = one(events, "output_captured")[stream]
    produced = b"".join(block(index, 1 << 16) for index in range(report["bytes_seen"] // (1 << 16) + 1))
    assert report["bytes_seen"] > cap and report["truncated"]
    assert assert_captured(report, cap_dir / f"{stream}.log", produced[: report["bytes_seen"]], cap) == produced[:cap]
    # The child's echoed stderr may end without a newline: the runner's line is the last one's end.
    assert (
        f"processkit-cli: run output exceeded the 1048576-byte capture ceiling on {stream}: " in stderr_lines(proc)[-1]
    )


# -- setup: all or nothing -----------------------------------------------------------------------


def _under_a_file(root):
    (root / "file").write_bytes(b"")
    return root / "file" / "cap"


def _stderr_log_is_a_directory(root, stdout_before: bytes | None = None):
    cap_dir = root / "cap"
    (cap_dir / "stderr.log").mkdir(parents=True)
    if stdout_before is not None:
        (cap_dir / "stdout.log").write_bytes(stdout_before)
    return cap_dir


SETUP_FAILURES = {
    "under-a-regular-file": _under_a_file,
    "new-stdout-log-removed": _stderr_log_is_a_directory,
    "existing-stdout-log-untouched": lambda root: _stderr_log_is_a_directory(root, b"an earlier run\n"),
}


def _tree(root) -> dict:
    """Every path under ``root`` with its content (None for a directory)."""
    return {p.relative_to(root): None if p.is_dir() else p.read_bytes() for p in root.rglob("*")}


def assert_setup_failed(tmp_path, cap_dir) -> None:
    """111 before spawn: one runner_exit(setup) line, no child, a message on stderr only."""
    marker = tmp_path / "spawned"
    proc, events = run_checked(
        tmp_path, "--capture-dir", cap_dir, command=python_child(f"open({str(marker)!r}, 'w')"), returncode=111
    )
    assert [e["event"] for e in events] == ["runner_exit"]
    assert events[0]["source"] == "setup"
    assert not marker.exists()
    assert proc.stdout == b""
    assert stderr_lines(proc)[-1].startswith("processkit-cli: could not set up output capture in ")


@pytest.mark.parametrize("case", SETUP_FAILURES)
def test_a_capture_dir_that_cannot_be_set_up_is_111_and_leaves_no_trace(tmp_path, case):
    root = tmp_path / "root"
    root.mkdir()
    cap_dir = SETUP_FAILURES[case](root)
    before = _tree(root)
    assert_setup_failed(tmp_path, cap_dir)
    assert _tree(root) == before


def test_the_capture_dir_is_not_touched_when_the_jsonl_cannot_be_opened(tmp_path):
    """The JSONL opens first (docs/run.md §1.3): its failure ends the run before capture setup."""
    proc = run_cli(
        "run", "--jsonl", tmp_path / "missing" / "run.jsonl", "--capture-dir", tmp_path / "cap", "--", "true"
    )
    assert proc.returncode == 111
    assert not (tmp_path / "cap").exists()


def test_directories_created_by_a_failed_setup_are_removed(tmp_path, small_tmpfs):
    """Room for two directories and stdout.log, not for stderr.log: all three are undone."""
    volume = small_tmpfs("volume", "size=1m,nr_inodes=4")
    assert_setup_failed(tmp_path, volume / "a" / "b")
    assert list(volume.iterdir()) == []


def test_a_successful_setup_empties_existing_files_and_leaves_devices_alone(tmp_path):
    """stdout.log is emptied; stderr.log is a link to /dev/null, which cannot be emptied (and
    must not fail the setup after stdout.log was already emptied)."""
    cap_dir = tmp_path / "cap"
    cap_dir.mkdir()
    (cap_dir / "stdout.log").write_bytes(b"a much longer transcript from an earlier run\n")
    (cap_dir / "stderr.log").symlink_to(os.devnull)
    code = "import os; os.write(1, b'new\\n'); os.write(2, b'err\\n')"
    _, events = run_checked(tmp_path, "--capture-dir", cap_dir, command=python_child(code), returncode=0)
    report = one(events, "output_captured")
    assert assert_captured(report["stdout"], cap_dir / "stdout.log", b"new\n") == b"new\n"
    assert (report["stderr"]["bytes_written"], report["stderr"]["write_error"]) == (4, False)


# -- a write failure mid-run ----------------------------------------------------------------------


def test_a_full_file_system_latches_write_error_and_loses_nothing_else(tmp_path, pump_backend, small_tmpfs):
    """stdout.log lives on a 1 MiB tmpfs, stderr.log (a link) elsewhere: stdout's file stops at
    the first failed write; its count, its digest, the echo, the other file and the stream go on.
    The short file is said on stderr once the run is over, as a cut at the cap is (it was said
    only by ``write_error``: a file read later passed for the whole stream)."""
    cap_dir = small_tmpfs("cap", "size=1m")
    elsewhere = tmp_path / "stderr-elsewhere.log"
    elsewhere.write_bytes(b"stale")
    (cap_dir / "stderr.log").symlink_to(elsewhere)
    out, err = block(1, 3 << 20), block(2, 2 << 20)
    command = child_command(f"p.interleave(p.block(1, {3 << 20}), p.block(2, {2 << 20}))")
    proc, events = run_checked(tmp_path, "--capture-dir", cap_dir, command=command, returncode=0)
    report = one(events, "output_captured")
    kept = assert_captured(report["stdout"], cap_dir / "stdout.log", out)
    said = (
        f"processkit-cli: warning: a write to stdout's capture failed: {cap_dir / 'stdout.log'} "
        f"holds {len(kept)} of its {len(out)} bytes\n".encode()
    )
    opened = b"" if err.endswith(b"\n") else b"\n"  # the warning starts a line of its own
    assert (proc.stdout, proc.stderr) == (out, err + opened + said)
    assert report["stdout"]["write_error"] and 0 < len(kept) <= 1 << 20
    assert assert_captured(report["stderr"], cap_dir / "stderr.log", err) == err
    assert one(events, "root_exited")["code"] == 0


def test_a_capture_past_its_cap_and_hit_by_a_failed_write_is_said_as_the_failed_write(tmp_path, small_tmpfs):
    """``--capture-max-bytes`` above what a full disk let the file take: the warning said the
    file was cut at the cap, so its 64 KiB read as the cap's 200000 bytes."""
    cap_dir = small_tmpfs("cap", "size=64k")
    command = child_command("p.write_all(1, p.block(1, 300000))")
    proc, events = run_checked(
        tmp_path, "--capture-dir", cap_dir, "--capture-max-bytes", "200000", command=command, returncode=0
    )
    stdout = one(events, "output_captured")["stdout"]
    assert stdout["write_error"] and stdout["truncated"], stdout
    warned = [line for line in proc.stderr.decode().splitlines() if "warning" in line]
    assert warned == [
        f"processkit-cli: warning: a write to stdout's capture failed: {cap_dir / 'stdout.log'} "
        f"holds {stdout['bytes_written']} of its 300000 bytes"
    ]


# -- a consumer that slows down, then stops --------------------------------------------------------


def test_a_slow_echo_consumer_is_served_and_one_that_stops_loses_only_the_echo(tmp_path, pump_backend):
    """The child exits at once with 4.9 MiB for a consumer that takes ~120 KiB/s for 3 s, then
    stops reading. While it makes progress it must get every byte, in order (however the
    runner's backlog refills meanwhile); once it stalls it loses the echo, but the pipe is still
    read to EOF for the capture. The reads are paced on purpose: slowness is the scenario. The
    echo's stall is 1 s here, and the pipes' bound after the root's exit 0.5 s: what a stopped
    reader loses is the subject, not how long it is waited for (tests/test_echo_paused_reader.py)."""
    size, piece = 4_900_000, 24 * 1024
    produced = block(7, size)
    cap_dir, jsonl = tmp_path / "cap", tmp_path / "run.jsonl"
    proc = start_cli(
        "run", "--jsonl", jsonl, "--capture-dir", cap_dir, "--", *child_command(f"p.write_all(1, p.block(7, {size}))"),
        patched=("teardown", "ECHO_STALL_SECONDS", "1.0", *SHORT_EXIT_DRAIN),
    )  # fmt: skip
    received = bytearray()
    for _ in range(16):
        chunk = _read_exactly(proc.stdout.fileno(), piece)
        assert len(chunk) == piece, f"the echo ended after {len(received) + len(chunk)} bytes"
        received += chunk
        time.sleep(0.2)
    assert proc.wait(timeout=SAFETY_NET) == 0
    received += proc.stdout.read()
    assert received == produced[: len(received)]
    assert "live echo abandoned" in proc.stderr.read().decode()
    assert_captured(one(check_stream(jsonl, 0), "output_captured")["stdout"], cap_dir / "stdout.log", produced)


def _read_exactly(fd: int, size: int) -> bytes:
    """``size`` bytes, or fewer at EOF."""
    data = b""
    while len(data) < size and (chunk := os.read(fd, size - len(data))):
        data += chunk
    return data


# -- one 80 MiB line ------------------------------------------------------------------------------


# A child's ru_maxrss starts at its parent's RSS when it was spawned (exec carries the old
# address space's high-water mark over), so a runner spawned by pytest would report pytest's
# size. This small launcher spawns it instead and writes the runner's wait4 peak to a file.
PEAK_LAUNCHER = (
    "import os, sys; pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ); "
    "_, status, usage = os.wait4(pid, 0); open(sys.argv[1], 'w').write(str(usage.ru_maxrss)); "
    "sys.exit(os.waitstatus_to_exitcode(status))"
)


def test_an_80_mib_line_passes_byte_exact_in_bounded_memory(tmp_path, pump_backend):
    """No newline anywhere: nothing may be assembled into lines. The runner's peak RSS (which
    also covers its child, itself smaller) stays far below the size of the line."""
    total = 80 << 20
    expected = hashlib.sha256()
    for piece in line_pieces(total):
        expected.update(piece)
    cap_dir, jsonl, peak = tmp_path / "cap", tmp_path / "run.jsonl", tmp_path / "peak"
    command = child_command(f"[p.write_all(1, piece) for piece in p.line_pieces({total})]")
    run = ["run", "--jsonl", str(jsonl), "--capture-dir", str(cap_dir), "--capture-max-bytes", "100m", "--", *command]
    proc = subprocess.Popen(
        [sys.executable, "-c", PEAK_LAUNCHER, str(peak), *cli_command(), *run],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    echoed, count = hashlib.sha256(), 0
    while chunk := proc.stdout.read1(1 << 20):
        echoed.update(chunk)
        count += len(chunk)
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    assert (count, echoed.hexdigest()) == (total, expected.hexdigest())
    report = one(check_stream(jsonl, 0), "output_captured")["stdout"]
    assert (report["bytes_seen"], report["bytes_written"], report["truncated"]) == (total, total, False)
    assert report["sha256"] == expected.hexdigest() == hashlib.sha256((cap_dir / "stdout.log").read_bytes()).hexdigest()
    assert int(peak.read_text()) < 40 * 1024, f"peak RSS {peak.read_text()} KiB"


# -- a FIFO planted where a capture file goes ------------------------------------------------------


def test_a_capture_fifo_without_a_reader_is_a_setup_failure_not_a_hang(tmp_path):
    cap_dir = tmp_path / "cap"
    cap_dir.mkdir()
    os.mkfifo(cap_dir / "stdout.log")
    proc, events = run_checked(tmp_path, "--capture-dir", cap_dir, command=["true"], returncode=111, timeout=60)
    assert [e["event"] for e in events] == ["runner_exit"]
    assert events[0]["source"] == "setup"


def test_a_capture_fifo_whose_reader_stalls_latches_write_error_and_the_run_ends(tmp_path, pump_backend):
    """The reader opens the FIFO and never reads: capture stops at the first write the FIFO
    refuses, while the echo, the counts and the run carry on."""
    cap_dir = tmp_path / "cap"
    cap_dir.mkdir()
    fifo = cap_dir / "stdout.log"
    os.mkfifo(fifo)
    stalled_reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        out = block(1, 1 << 20)  # far beyond a FIFO's 64 KiB
        command = child_command(f"p.interleave(p.block(1, {1 << 20}), b'')")
        proc, events = run_checked(tmp_path, "--capture-dir", cap_dir, command=command, returncode=0)
    finally:
        os.close(stalled_reader)
    assert proc.stdout == out
    report = one(events, "output_captured")["stdout"]
    assert report["write_error"] and report["bytes_seen"] == len(out)
    assert report["bytes_written"] < len(out)
    assert proc.stderr.endswith(
        f"a write to stdout's capture failed: {fifo} holds {report['bytes_written']} of its {len(out)} bytes\n".encode()
    )


@pytest.mark.parametrize("size", [9, 10, 24])
def test_a_capture_cut_at_its_cap_is_said_on_stderr_as_in_the_stream(tmp_path, size):
    """The echo shows every byte and the file keeps the cap's worth: the cut is said once on
    stderr (as the API warns of it) exactly when ``output_captured`` says ``truncated``, with
    what the file holds of how many bytes; a stream that fits, or ends at the cap, says nothing.
    With ``--capture-overflow cancel`` the run's own 113 line says it, alone."""
    cap_dir = tmp_path / "cap"
    command = ["sh", "-c", f"head -c {size} /dev/zero | tr '\\0' x; echo err >&2"]
    proc, events = run_checked(
        tmp_path, "--capture-dir", cap_dir, "--capture-max-bytes", "10", command=command, returncode=0
    )
    assert proc.stdout == b"x" * size
    truncated = one(events, "output_captured")["stdout"]["truncated"]
    assert truncated == (size > 10)
    said = (
        f"processkit-cli: warning: stdout's capture was cut at --capture-max-bytes: {cap_dir / 'stdout.log'} "
        f"holds 10 of its {size} bytes\n".encode()
    )
    assert proc.stderr == b"err\n" + (said if truncated else b"")
    stopped = run_cli(
        "run", "--jsonl", tmp_path / "cancel.jsonl", "--capture-dir", cap_dir, "--capture-max-bytes", "10",
        "--capture-overflow", "cancel", "--", "sh", "-c", "head -c 24 /dev/zero; sleep 30",
    )  # fmt: skip
    assert stopped.returncode == 113
    assert [line for line in stopped.stderr.splitlines() if line.startswith(b"processkit-cli:")] == [
        stopped.stderr.splitlines()[-1]
    ]
