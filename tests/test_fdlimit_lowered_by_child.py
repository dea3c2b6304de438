"""A child that lowers its runner's open-file limit (``prlimit --pid $PPID --nofile=20:20``) leaves
the runner short of descriptors: its line said ``the open-file limit (ulimit -n: 20) is reached;
raise the limit``, though the caller's limit was 20000 and raising it would change nothing. It now
says the limit was lowered under it (``fdlimit.exhausted``), and the tree is still ended."""

from __future__ import annotations

import shutil
import time

import pytest

from conftest import SAFETY_NET, pid_alive, read_events, run_cli

pytestmark = pytest.mark.skipif(shutil.which("prlimit") is None, reason="no prlimit(1)")


@pytest.mark.parametrize("limit", ["20:20", "20:"])
def test_a_limit_lowered_by_the_child_is_said_so_not_raise_the_limit(tmp_path, pump_backend, limit):
    stream, pidfile = tmp_path / "run.jsonl", tmp_path / "child.pid"
    script = f"prlimit --pid $PPID --nofile={limit}; echo $$ > {pidfile}; echo x; exec sleep 30"
    done = run_cli("run", "--jsonl", stream, "--capture-dir", tmp_path / "cap", "--", "sh", "-c", script, cwd=tmp_path)
    if done.returncode == 0:
        pytest.skip("the run held few enough descriptors to finish under the lowered limit")
    err = done.stderr.decode()
    assert "lowered from" in err and "raise the limit" not in err, err
    assert "(ulimit -n: 20)" in err, err
    assert read_events(stream)[0]["event"] == "run_started"
    child, deadline = int(pidfile.read_text()), time.monotonic() + SAFETY_NET
    while pid_alive(child):  # the tree is ended with the runner (its parent-death signal), not left to run on
        assert time.monotonic() < deadline, "the child outlived its runner"
        time.sleep(0.02)
