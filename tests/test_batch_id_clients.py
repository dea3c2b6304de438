"""The by-id clients given a live batch's own id (the ``batch`` label its jobs carry, the
``run_id`` of the batch's registry record): ``inspect``, ``cancel`` and ``kill`` said ``no run
with that id is registered`` and ``events`` that a run exiting cleanly deletes its record,
though the batch's record was registered and live. Now each says what it is, as the
reference's reader would see it (a live run without an endpoint: 103), and where its jobs are."""

from __future__ import annotations

import json
from contextlib import ExitStack

from conftest import SAFETY_NET, reaped, run_cli, start_cli, wait_for_event
from test_wait_batch import held_until

REFUSED = 103


def test_a_batchs_own_id_is_said_to_be_a_batch_whose_jobs_carry_its_label(tmp_path):
    release, out, manifest = tmp_path / "release", tmp_path / "out", tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"id": "held", "args": held_until(release)}) + "\n")
    with ExitStack() as ours:  # a step failed: what it started, killed by handle
        batch = ours.enter_context(reaped(start_cli("batch", manifest, "--out", out, cwd=tmp_path)))
        label = wait_for_event(out / "held" / "events.jsonl", "run_started")["labels"]["batch"]
        for client in (["inspect"], ["cancel"], ["kill"], ["events"]):
            said = run_cli(*client, "--run-id", label, cwd=tmp_path)
            assert said.returncode == REFUSED, (client, said.stderr)
            text = said.stderr.decode()
            assert "it is a batch" in text and f"`list --label batch={label}`" in text, text
            assert "no run with that id" not in text and "deletes its own record" not in text, text
        enveloped = run_cli("--error-format", "json", "cancel", "--run-id", label, cwd=tmp_path)
        error = json.loads(enveloped.stderr)
        assert (error["code"], error["kind"]) == (REFUSED, "control_unreachable"), error  # the reference's, no endpoint
        release.touch()
        _, err = batch.communicate(timeout=SAFETY_NET)
    assert batch.returncode == 0, err  # its job ran on, never cancelled nor killed
