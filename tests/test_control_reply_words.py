"""A runner's reply a control client cannot take is said in the reference's words and kinds:
a refusal's own text is the reason, a reply for another run or another verb is
``control_unreachable``, and only a version this client does not read is
``incompatible_contract`` (docs/control-plane.md §1.3). Each case drives the installed
processkit-cli against a fake runner that answers with the given line."""

from __future__ import annotations

import json
import os

import pytest

from conftest import run_cli
from test_fuzz_inputs import ACK, ATTESTATION, SNAPSHOT, fake_runner  # noqa: F401

NEWER = (
    "the runner answered with control-plane snapshot version 3, and this client reads versions 1 to 2 "
    "(the runner is a newer build than this client, so what its version changed is unknown here); the reply "
    "was refused rather than rendered under semantics its sender never promised — inspect this run with a "
    "processkit-cli build that implements its snapshot version (for a newer runner, one at least as new as "
    "the binary that started the run)"
)
CASES = [
    ("cancel", {"error": "no such verb"}, "control_unreachable", "no such verb"),
    ("cancel", {**ACK, "run_id": "other"}, "control_unreachable", "the runner did not acknowledge the command"),
    ("cancel", {**ACK, "action": "kill"}, "control_unreachable", "the runner did not acknowledge the command"),
    ("cancel", {**ACK, "accepted": False}, "control_unreachable", "the runner did not acknowledge the command"),
    ("cancel", {**ACK, "action": "inspect"}, "control_unreachable", "the runner did not acknowledge the command"),
    ("inspect", {**SNAPSHOT, "run_id": "other"}, "control_unreachable", "the runner returned a snapshot for a different run"),
    ("attest", {**ATTESTATION, "run_id": "other"}, "control_unreachable", "the runner returned an attestation for a different run"),
    ("inspect", {**SNAPSHOT, "snapshot_version": 3}, "incompatible_contract", NEWER),
    ("inspect", [1], "control_unreachable", "the runner sent an unreadable response: it is not a JSON object"),
]  # fmt: skip


@pytest.mark.parametrize("verb, reply, kind, why", CASES)
def test_a_reply_the_client_cannot_take_is_said_in_the_reference_words(fake_runner, verb, reply, kind, why):  # noqa: F811
    fake_runner.reply = json.dumps(reply).encode() + b"\n"
    env = {**os.environ, "PROCESSKIT_CLI_REGISTRY_DIR": fake_runner.registry}
    done = run_cli("--error-format", "json", verb, "--run-id", "fake", env=env)
    assert (done.returncode, done.stdout) == (103, b""), done.stderr
    envelope = json.loads(done.stderr)
    assert (envelope["kind"], envelope["message"]) == (kind, f"cannot {verb} run `fake`: {why}")


@pytest.mark.parametrize("verb", ["cancel", "kill"])
def test_an_all_target_that_declines_is_said_in_the_fan_outs_words(fake_runner, verb):  # noqa: F811
    """As the reference's aggregate ack check: the per-target error names the snapshotted target."""
    fake_runner.reply = json.dumps({**ACK, "action": verb, "accepted": False}).encode() + b"\n"
    env = {**os.environ, "PROCESSKIT_CLI_REGISTRY_DIR": fake_runner.registry}
    done = run_cli(verb, "--all", env=env)
    assert done.returncode == 103, done.stderr
    [target] = json.loads(done.stdout)
    why = "the runner did not acknowledge the command for the snapshotted target"
    assert (target["status"], target["error"]) == ("failed", f"cannot {verb} run `fake`: {why}")
