"""``bench``'s ``user`` and ``system`` carry hyperfine's names with the whole tree's meaning: a
process the command started and did not wait for is in them (hyperfine's, its
``getrusage(RUSAGE_CHILDREN)`` across the run, hold only the root and what it waited for). The figure is pinned here, and the help says so where a
hyperfine user looks (``--export-json``), as docs/differences.md does."""

from __future__ import annotations

import json
import sys

from conftest import run_cli

BURNED = 0.05  # CPU seconds the left-behind process has used, by its own clock, before the root exits

SCRIPT = f"""{sys.executable} -c 'import sys, time
while time.process_time() < {BURNED}:
    pass
open(sys.argv[1], "w").close()
time.sleep(300)' "burned-$HYPERFINE_ITERATION" &
while [ ! -e "burned-$HYPERFINE_ITERATION" ]; do sleep 0.01; done
"""


def test_a_process_left_running_is_in_the_runs_user_and_system(tmp_path):
    (tmp_path / "leave.sh").write_text(SCRIPT)
    out = tmp_path / "b.json"
    done = run_cli("bench", "-N", "--style", "none", "--runs", "2", "sh leave.sh", "--export-json", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(out.read_text())["results"]
    per_run = [user + system for user, system in zip(result["user_times"], result["system_times"])]
    assert all(cpu >= BURNED for cpu in per_run), per_run  # the root itself used a few ms at most
    assert result["user"] + result["system"] >= BURNED, result


def test_the_help_says_what_user_and_system_hold(tmp_path):
    done = run_cli("bench", "--help", cwd=tmp_path)
    said = " ".join(done.stdout.decode().split())
    assert "user and system, as on the terminal, are the whole tree's CPU" in said, said
    assert "where hyperfine counts only what it waited for" in said, said
