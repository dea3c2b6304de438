"""An attached handle's ``events()`` refusing a stream that is not its run's (a run whose
``--jsonl`` another run held; a stream whose head names another run) quoted the path raw in the
exception's text: a ``--jsonl`` holding an ESC reached a traceback on a terminal as a control
sequence, where the CLI's line shows it escaped. Both are escaped as the API's refusals are
(``processkit/refusal.refused``)."""

from __future__ import annotations

import json
import os
import sys

import pytest

import processkit

from conftest import SAFETY_NET, UNTIL_RELEASED, listed_when, reaped, start_cli, wait_for_event

STREAM = "e\x1b[7mX.jsonl"


def _refused(run_id: str) -> str:
    with pytest.raises(OSError) as refused:
        next(iter(processkit.attach(run_id).events()))
    return str(refused.value)


def test_a_held_runs_refusal_shows_its_path_escaped(tmp_path):
    release = tmp_path / "release"
    child = (sys.executable, "-c", UNTIL_RELEASED, str(release))
    first = start_cli("run", "--jsonl", STREAM, "--run-id", "first", "--", *child, cwd=tmp_path)
    with reaped(first):
        wait_for_event(tmp_path / STREAM, "run_started")
        later = start_cli("run", "--jsonl", STREAM, "--run-id", "later", "--", *child, cwd=tmp_path)
        with reaped(later):
            listed_when(lambda runs: "later" in runs)
            said = _refused("later")
            assert "\x1b" not in said and "e\\x1b[7mX.jsonl" in said, repr(said)
            release.touch()
            later.communicate(timeout=SAFETY_NET)
        first.communicate(timeout=SAFETY_NET)


def test_another_runs_stream_is_refused_with_its_path_escaped(tmp_path):
    release = tmp_path / "release"
    child = (sys.executable, "-c", UNTIL_RELEASED, str(release))
    runner = start_cli("run", "--jsonl", STREAM, "--run-id", "mine", "--", *child, cwd=tmp_path)
    with reaped(runner):
        started = wait_for_event(tmp_path / STREAM, "run_started")
        listed_when(lambda runs: "mine" in runs)
        swapped = tmp_path / "swapped"
        swapped.write_text(json.dumps({**started, "run_id": "other"}) + "\n")
        os.replace(swapped, tmp_path / STREAM)  # another run's stream at the path the record names
        said = _refused("mine")
        assert "\x1b" not in said and "e\\x1b[7mX.jsonl" in said, repr(said)
        release.touch()
        runner.communicate(timeout=SAFETY_NET)
