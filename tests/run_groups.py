"""A runner's cgroups, as the tests find them: by its run token, never by its pid alone.

A run group is named ``processkit-run-<token>`` (a batch's or a pool's lent group adds
``.j<seq>``), and a token is ``<runner pid>-<hex time_ns when it was made>-<seq>``
(``rundir.new_token``). Pid numbers recur: each new container (CI's) starts them again, and a
group that an earlier runner with the same pid left on this host (a killed run nobody pruned, a
day before) is still there. A test that looked for ``processkit-run-<pid>-*`` took that group for
its own runner's: "none left" failed on it (stop 67's CI), "one was made" passed on it. So a
runner's groups are those whose token names its pid and a time since the test began (set here
as each test starts: this module is a pytest plugin, ``conftest.pytest_plugins``) or since a
time the caller gives (a script of a test's own, outside pytest, gives its start).
``tests/test_run_groups.py`` fails on a test that spells the pid prefix itself.
"""

from __future__ import annotations

import os
import time

PREFIX = "processkit-run-"
CGROUP_TOP = "/sys/fs/cgroup"
_test_began = [0]  # time_ns at the start of the test running in this process (0: none yet)


def pytest_runtest_logstart(nodeid: str, location) -> None:
    _test_began[0] = time.time_ns()


def token_of(name: str) -> tuple[int, int] | None:
    """``(runner pid, token time in ns)`` of a run group's name or path (a ``.j<seq>`` group's
    too), None for a name no runner makes."""
    base = os.path.basename(name)
    if not base.startswith(PREFIX):
        return None
    parts = base[len(PREFIX) :].split(".j")[0].split("-")
    if len(parts) != 3 or not parts[0].isdigit():
        return None
    try:
        return int(parts[0]), int(parts[1], 16)
    except ValueError:
        return None


def name(runner_pid: int, at_ns: int) -> str:
    """A group's name whose token names ``runner_pid`` and the time ``at_ns``."""
    return f"{PREFIX}{runner_pid}-{at_ns:x}-0"


def _since(since_ns: int | None) -> int:
    if since_ns is not None:
        return since_ns
    assert _test_began[0], "no test has begun in this process: give the time the runner began"
    return _test_began[0]


def made_by(group: str, runner_pid: int, since_ns: int | None = None) -> bool:
    """Whether ``group`` (a path or a base name) was made by the runner ``runner_pid`` since
    ``since_ns`` (default: since the current test began)."""
    token = token_of(group)
    return token is not None and token[0] == runner_pid and token[1] >= _since(since_ns)


def groups_of(runner_pid: int, since_ns: int | None = None, *tops: str) -> list[str]:
    """Every group the runner ``runner_pid`` made since ``since_ns`` (default: since the current
    test began) at any depth below ``tops`` (default: the whole cgroup tree), sorted."""
    since = _since(since_ns)
    found = []
    for top in tops or (CGROUP_TOP,):
        for root, dirs, _ in os.walk(top):
            found += [os.path.join(root, group) for group in dirs if made_by(group, runner_pid, since)]
    return sorted(found)
