"""``processkit.start(jsonl=F)`` while another live run writes F (``--jsonl`` holds its file
alone): the run's runner is refused (111, "a process holds a lock on it: another run writing
it, ..."), but ``start`` followed F, read the other run's stream and, once its own runner was
gone, raised ``ForeignStream`` ("holds another run's events"), the real cause lost. A run that
ended without starting now gives its handle with that result, as ``start`` does for any run
that ended before its child started; ``processkit.run`` said it right already."""

from __future__ import annotations

import json
import sys

from conftest import SAFETY_NET, UNTIL_RELEASED, start_cli, wait_for_event

import processkit


def test_start_on_a_jsonl_another_live_run_writes_returns_the_refusal(tmp_path):
    stream, release = tmp_path / "held.jsonl", tmp_path / "release"
    other = start_cli(
        "run", "--jsonl", stream, "--run-id", "holder", "--", sys.executable, "-c", UNTIL_RELEASED, str(release),
    )  # fmt: skip
    try:
        wait_for_event(stream, "run_started")
        handle = processkit.start(["echo", "mine"], jsonl=str(stream))
        result = handle.result(SAFETY_NET)
    finally:
        release.touch()
        other.communicate(timeout=SAFETY_NET)
    assert result.returncode == 111, result
    assert "a process holds a lock on it: another run writing it" in result.diagnostics, result.diagnostics
    assert handle.pid is None
    assert list(handle.events()) == []  # none of the other run's
    assert other.returncode == 0
    events = [json.loads(line) for line in stream.read_text().splitlines()]
    assert {event.get("run_id", "holder") for event in events} == {"holder"}, events
