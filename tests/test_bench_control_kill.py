"""A control ``kill`` that cuts a cancelled sample's grace short is said as the engine says it
(``engine/endings.py``'s ``stopped``), on the direct path too (``benchmark/direct.py``).

A benchmark's run has no grace (``driver.session_spec``: 0 s), so the words cannot differ there;
the test lengthens the session's grace to 10 minutes in a real ``bench`` process, so that a
direct path passing no shutdown record says "waited 600s grace" of a grace it ended at once."""

from __future__ import annotations

import os

import pytest

from conftest import SAFETY_NET, listed_when, reaped, run_cli, start_cli, wait_for_file

# ``driver.session_spec`` with the session's grace made 10 minutes (a ``patched_cli`` triple).
LONG_GRACE = (
    "processkit.benchmark.driver",
    "session_spec",
    "(lambda real: lambda options: (lambda spec: (setattr(spec, 'grace_ms', 600_000), spec)[1])(real(options)))"
    "(importlib.import_module('processkit.benchmark.driver').session_spec)",
)


@pytest.mark.parametrize("path", ["direct", "engine"])
def test_a_kill_that_cut_a_samples_grace_short_is_not_said_to_have_waited_it(tmp_path, path):
    started = tmp_path / "started"
    command = f"sh -c 'trap \"\" TERM; echo > {started}; exec sleep 1200'"
    env = dict(os.environ, PROCESSKIT_BENCH_PATH=path)
    args = ("bench", "-N", "--style", "none", "--runs", "2", command)
    with reaped(start_cli(*args, patched=LONG_GRACE, cwd=tmp_path, env=env)) as process:
        wait_for_file(started)
        (run_id,) = listed_when(lambda runs: len(runs) == 1)
        assert run_cli("cancel", "--run-id", run_id).returncode == 0  # acked once the sample has it
        assert run_cli("kill", "--run-id", run_id).returncode == 0  # during the cancel's grace
        _, stderr = process.communicate(timeout=SAFETY_NET)
    said = stderr.decode()
    assert process.returncode == 118, said
    assert "run cancelled by a control-plane command: sent SIGTERM" in said, said
    assert "waited 600s grace" not in said, said
    assert "of its 600s grace until a control kill cut it short, then hard-killed any survivors" in said, said
