"""A capture stands only for bytes the runner read: a stream the child writes straight past it (a
file, a descriptor, ``start``'s pipe, /dev/null under ``echo=True``) is refused with
``capture_dir=`` (and with ``jsonl=`` where ``run``'s PIPE makes a capture), or, in ``run``'s
scratch capture, reported as no capture (None) rather than a complete empty one. Before, its
``stdout.log`` stayed empty and its ``CaptureInfo`` and ``output_captured`` said 0 bytes."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

import processkit

OUT, ERR = b"out\x00bytes\n" * 300, b"err bytes\n" * 70
WRITE = f"import os; os.write(1, {OUT!r}); os.write(2, {ERR!r}); open('ran', 'w').close()"
ARGS = [sys.executable, "-c", WRITE]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def output_captured(path) -> dict:
    with open(path, encoding="utf-8") as stream:
        return [e for e in map(json.loads, stream) if e["event"] == "output_captured"][-1]


def handed(kind: str, tmp_path, opened: list):
    """The caller's own target for a stream: a file object, a descriptor, PIPE or DEVNULL."""
    if kind in ("file", "descriptor"):
        fd = os.open(tmp_path / "handed.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        opened.append(os.fdopen(fd, "wb") if kind == "file" else fd)
        return opened[-1]
    return {"pipe": subprocess.PIPE, "devnull": subprocess.DEVNULL}[kind]


def close_all(opened: list) -> None:
    for target in opened:
        target.close() if hasattr(target, "close") else os.close(target)


def call(how: str, tmp_path, **kwargs) -> processkit.RunResult:
    if how == "run":
        return processkit.run(ARGS, cwd=tmp_path, **kwargs)
    with processkit.start(ARGS, cwd=tmp_path, **kwargs) as handle:
        handle.communicate(timeout=60)
        return handle.result()


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
@pytest.mark.parametrize(  # run's PIPE is read back from its capture: test_the_captures_the_runner_read_are_exact
    "how, kind",
    [(how, kind) for how in ("run", "start") for kind in ("file", "descriptor", "devnull+echo")] + [("start", "pipe")],
)
def test_a_capture_dir_with_a_stream_past_the_runner_is_refused(how, stream, kind, tmp_path):
    opened: list = []
    target = handed(kind.split("+")[0], tmp_path, opened)
    try:
        with pytest.raises(ValueError) as refused:
            call(how, tmp_path, capture_dir=tmp_path / "cap", echo=kind.endswith("echo"), **{stream: target})
    finally:
        close_all(opened)
    said = str(refused.value)
    assert said.startswith(f"capture_dir records {stream}'s capture, but the child writes {stream} straight to ")
    assert "\n" not in said and "past the runner" in said
    assert not (tmp_path / "cap").exists() and not (tmp_path / "ran").exists()  # refused before anything ran


def test_jsonl_with_run_pipe_and_a_handed_stream_is_refused(tmp_path):
    with open(tmp_path / "err.log", "wb") as err, pytest.raises(ValueError, match="^jsonl records stderr's capture"):
        processkit.run(ARGS, cwd=tmp_path, stdout=subprocess.PIPE, stderr=err, jsonl=tmp_path / "ev.jsonl")
    assert not (tmp_path / "ev.jsonl").exists() and not (tmp_path / "ran").exists()


@pytest.mark.parametrize("kind", ["file", "descriptor"])
def test_run_pipe_beside_a_handed_stream_reports_no_capture_for_it(kind, tmp_path):
    opened: list = []
    try:
        result = processkit.run(ARGS, cwd=tmp_path, stdout=subprocess.PIPE, stderr=handed(kind, tmp_path, opened))
    finally:
        close_all(opened)
    assert result.returncode == 0 and result.stdout == OUT
    assert (tmp_path / "handed.log").read_bytes() == ERR  # the child wrote it there itself
    assert result.stderr_capture is None  # not a complete capture of 0 bytes
    assert "output_captured" not in [event.name for event in result.events]  # nor its scratch event
    captured = result.stdout_capture
    assert captured is not None and (captured.bytes_seen, captured.sha256) == (len(OUT), sha(OUT))


@pytest.mark.parametrize(
    "how, kwargs",
    [
        ("run", {"capture_output": True}),
        ("run", {"stdout": subprocess.PIPE}),
        ("run", {"stdout": subprocess.DEVNULL}),
        ("run", {}),
        ("start", {}),
        ("start", {"stderr": subprocess.DEVNULL}),
    ],
)
def test_the_captures_the_runner_read_are_exact(how, kwargs, tmp_path):
    result = call(how, tmp_path, capture_dir=tmp_path / "cap", jsonl=tmp_path / "ev.jsonl", **kwargs)
    event = output_captured(tmp_path / "ev.jsonl")
    for name, wrote in (("stdout", OUT), ("stderr", ERR)):
        kept = (tmp_path / "cap" / f"{name}.log").read_bytes()
        info = getattr(result, f"{name}_capture")
        assert sha(kept) == sha(wrote) == info.sha256 == event[name]["sha256"]
        assert info.bytes_seen == event[name]["bytes"] == event[name]["bytes_seen"] == len(wrote)


def test_stderr_into_stdout_is_one_stream_as_a_pty(tmp_path):
    result = call("run", tmp_path, stderr=subprocess.STDOUT, capture_dir=tmp_path / "cap")
    assert sha((tmp_path / "cap" / "stdout.log").read_bytes()) == sha(OUT + ERR) == result.stdout_capture.sha256
    assert result.stdout_capture.bytes_seen == len(OUT + ERR)
    assert (tmp_path / "cap" / "stderr.log").read_bytes() == b""  # the child's 2 is its 1
