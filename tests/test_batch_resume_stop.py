"""A stop signal while a ``--resume`` batch reads its earlier summary (a 166 MB one of 180,000
lines held a batch there for over 10 s), before its host watches the signals: the batch's stop
before any job, 107 with one closing line (death by SIGINT for Ctrl-C), where SIGTERM's and
SIGHUP's defaults once killed it without a word (-15, -1). The real ``processkit-cli``, its
summary read held by a patch that marks its start, so the signal lands inside it."""

from __future__ import annotations

import json
import signal

import pytest

from conftest import SAFETY_NET, reaped, run_cli, start_cli, wait_for_file

# ``finished_jobs`` (the summary's read) held: a mark made, then a long sleep a stop cuts short.
HELD = (
    "(lambda read, mark: lambda path: (open(mark, 'w').close(), __import__('time').sleep(600), read(path))[2])"
    "(importlib.import_module('processkit.batching.recorder').finished_jobs, {mark!r})"
)


# Ctrl-C's death by SIGINT is ``cli.main.entry``'s, which the patched runner does not go through.
@pytest.mark.parametrize(("number", "named"), [(signal.SIGTERM, "SIGTERM"), (signal.SIGHUP, "SIGHUP")])
def test_a_stop_while_resume_reads_the_summary_is_the_batchs_stop(tmp_path, number, named):
    manifest, out, mark = tmp_path / "m.jsonl", tmp_path / "out", tmp_path / "reading"
    manifest.write_text(json.dumps({"id": "a", "args": ["true"]}) + "\n")
    assert run_cli("batch", manifest, "--out", out, cwd=tmp_path).returncode == 0
    command = start_cli(
        "batch", manifest, "--out", out, "--resume", cwd=tmp_path,
        patched=("processkit.batching.recorder", "finished_jobs", HELD.format(mark=str(mark))),
    )  # fmt: skip
    with reaped(command) as batch:
        wait_for_file(mark)
        batch.send_signal(number)
        _, err = batch.communicate(timeout=SAFETY_NET)
    said = err.decode()
    assert batch.returncode == 107, said
    assert said.endswith(f"batch: no job started, cancelled by {named} (its --out being set up)\n"), said
