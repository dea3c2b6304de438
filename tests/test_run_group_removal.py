"""A run's own cgroup v2 group, at its teardown, goes by its ``rmdir`` alone: it is listed (for
groups below it, which ``rmdir`` refuses) only when that ``rmdir`` is refused. Before, every run
listed its group first (an ``open``, an ``fstat``, two ``getdents64``, a ``close`` and a
``DirEntry`` per interface file), though a run's group has a group below it only where its
process made one (``tests/test_containment_subtree.py`` keeps that case). Seen from outside:
the runner under ``strace``, its listings named by ``-y``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from conftest import SAFETY_NET, cli_command, read_events
from run_groups import made_by
from streams import one


def _paths(lines: list[str], pattern: str) -> list[str]:
    """The path each trace line matching ``pattern`` names (its one group)."""
    return [found.group(1) for found in map(re.compile(pattern).search, lines) if found]


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace(1) to see the runner's listings")
def test_a_plain_run_removes_its_own_group_without_listing_it(tmp_path):
    jsonl = tmp_path / "run.jsonl"
    trace = tmp_path / "trace"
    command = ["strace", "-f", "-qq", "-y", "-e", "trace=getdents64,rmdir", "-o", str(trace)]
    done = subprocess.run(
        [*command, *cli_command(), "run", "--jsonl", str(jsonl), "--", "true"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=SAFETY_NET,
    )
    assert done.returncode == 0, done.stderr
    events = read_events(jsonl)
    if one(events, "run_started")["mechanism"] != "cgroup_v2":
        pytest.skip("runs here get no cgroup v2 group")
    lines = trace.read_text().splitlines()
    assert lines, done.stderr
    # the run's groups are named by its token, which names the runner's pid (the traced
    # command's, first in the trace): an outer run's group this test may sit in is another's
    runner = int(lines[0].split()[0])
    removed = [path for path in _paths(lines, r'rmdir\("([^"]*)"\) = 0') if made_by(path, runner)]
    assert removed, "the run removed no group of its own:\n" + "\n".join(lines)
    assert not [path for path in _paths(lines, r"getdents64\(\d+<([^>]*)>") if made_by(path, runner)], "\n".join(lines)
    for path in removed:
        assert not os.path.exists(path)
