"""``processkit.attach`` reads its run id as ``--run-id`` does: one the CLI refuses (100) is a
ValueError in the same words, never a ``not_found`` ControlError echoing its bytes."""

from __future__ import annotations

import pytest

import processkit
from conftest import run_cli


@pytest.mark.parametrize("run_id", ["", "a\x1b[2Jb", "x" * 257])
def test_attach_refuses_a_run_id_the_cli_refuses(run_id, isolated_registry):
    said = "invalid value for '--run-id': a run id has 1 to 256 characters and no control, formatting"
    refused = run_cli("inspect", "--run-id", run_id)
    assert refused.returncode == 100 and said in refused.stderr.decode(), refused.stderr
    with pytest.raises(ValueError) as raised:
        processkit.attach(run_id)
    assert str(raised.value) == refused.stderr.decode().strip().removeprefix("processkit-cli: ").replace(
        "--run-id", "run_id="
    )
    assert "\x1b" not in str(raised.value)
