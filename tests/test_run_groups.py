"""A runner's groups are found by its pid and its token's time (``tests/run_groups.py``): a group
an earlier runner with the same pid left on the host is not its, and no test spells the pid
prefix ``processkit-run-<pid>-`` itself (each test that did took such a group for its runner's:
stop 67's CI failed on one a day old)."""

from __future__ import annotations

import ast
import os
import sys
import time
import warnings
from pathlib import Path

import pytest

from conftest import SAFETY_NET, start_cli, wait_for_event
from run_groups import PREFIX, groups_of, made_by, name
from streams import cgroup_v2_dir

TESTS = Path(__file__).parent
DAY_NS = 86_400 * 10**9
RELEASED = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.01)\n"


def _spells_prefix(node: ast.AST) -> bool:
    """``"...processkit-run-"`` or ``{RUN_PREFIX}`` / ``{PREFIX}``: the start of a group's name."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.endswith(PREFIX)
    if isinstance(node, ast.FormattedValue):
        return getattr(node.value, "attr", getattr(node.value, "id", None)) in ("RUN_PREFIX", "PREFIX")
    return False


def _script(node: ast.AST) -> ast.Module | None:
    """A string constant that is Python source (a script a test runs with ``-c``), parsed."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" in node.value):
        return None
    try:
        with warnings.catch_warnings():  # a shell line's ``\$`` in it: not this scan's business
            warnings.simplefilter("ignore")
            return ast.parse(node.value)
    except SyntaxError:
        return None


def pid_prefixes(text: str) -> list[int]:
    """The lines of f-strings that spell a runner's pid prefix, ``processkit-run-{pid}-`` (as a
    prefix or a glob: ``-`` or ``-*`` after the pid), not a whole token; in a script a string
    holds too, at that string's line."""
    return sorted(set(_spelled(ast.parse(text), None)))


def _spelled(tree: ast.AST, line: int | None) -> list[int]:
    found = []
    for node in ast.walk(tree):
        inner = _script(node)
        if inner is not None:
            found += _spelled(inner, line or node.lineno)
        if isinstance(node, ast.JoinedStr):
            parts = node.values
            for before, pid, after in zip(parts, parts[1:], parts[2:]):
                rest = after.value if isinstance(after, ast.Constant) else None
                if _spells_prefix(before) and isinstance(pid, ast.FormattedValue) and isinstance(rest, str):
                    if rest == "-" or rest.startswith("-*"):
                        found.append(line or node.lineno)
    return found


def test_no_test_finds_a_runners_groups_by_its_pid_alone():
    """Every test finds them through ``run_groups`` (its pid and its token's time)."""
    spelled = [
        f"{path.name}:{line}"
        for path in sorted(TESTS.glob("*.py"))
        if path.name not in ("run_groups.py", "test_run_groups.py")
        for line in pid_prefixes(path.read_text(encoding="utf-8"))
    ]
    assert spelled == []


def test_the_scan_names_each_way_a_pid_prefix_was_spelled():
    sample = (
        'a = glob.glob(f"/sys/fs/cgroup/**/processkit-run-{pid}-*", recursive=True)\n'
        'b = f"processkit-run-{runner.pid}-"\n'
        'c = f"{cgroupfs.RUN_PREFIX}{os.getpid()}-"\n'
        'd = glob.glob(f"/sys/fs/cgroup/**/processkit-run-{token}", recursive=True)\n'
        'e = f"processkit-run-{os.getppid()}-escape-test"\n'
        'SCRIPT = """\nimport os\nfound = [d for d in dirs if d.startswith(f"processkit-run-{pid}-")]\n"""\n'
    )
    assert pid_prefixes(sample) == [1, 2, 3, 6]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a group in the cgroup tree")
def test_a_group_an_earlier_runner_with_the_same_pid_left_is_not_the_runners(tmp_path):
    """A group named with the runner's pid and a token time of yesterday, beside the run's own
    group: while the run lives its groups are the runner's, that one is not; once it has ended,
    none is."""
    jsonl, release = tmp_path / "run.jsonl", tmp_path / "release"
    runner = start_cli("run", "--jsonl", jsonl, "--", sys.executable, "-c", RELEASED, release, cwd=tmp_path)
    planted = None
    try:
        started = wait_for_event(jsonl, "run_started")
        if started["mechanism"] != "cgroup_v2":
            pytest.skip("runs here get no cgroup v2 group")
        own = cgroup_v2_dir(started["root_pid"])
        assert own is not None and made_by(own, runner.pid)
        planted = os.path.join(os.path.dirname(own), name(runner.pid, time.time_ns() - DAY_NS))
        os.mkdir(planted)
        found = groups_of(runner.pid)
        assert own in found and planted not in found, found
        release.touch()
        assert runner.wait(timeout=SAFETY_NET) == 0
        assert groups_of(runner.pid) == [] and os.path.isdir(planted)
    finally:
        release.touch()
        runner.wait(timeout=SAFETY_NET)
        if planted is not None and os.path.isdir(planted):
            os.rmdir(planted)
