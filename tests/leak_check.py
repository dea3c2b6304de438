"""The session leaves no cgroup behind: a pytest plugin (``conftest.pytest_plugins``) that fails
the session naming every ``processkit-run-*`` group a runner of this session made that is still
on the host at its end, and the test that started that runner.

A runner that leaves a group breaks "nothing left behind", and a group no run directory speaks
for can never be removed by any sweep (``containment.sweep``): it stays on the host for good,
and every later run's sweep pays a look-up for it. Such leaks were found on the host after
whole sessions passed; this makes them a failure where they happen.

Which groups are this session's, when other runners (other sessions, other users, other
checkouts) may make and leave groups on the same host at the same time: a group's name carries
its run's token, ``<runner pid>-<hex time_ns at the token>-<seq>`` (``rundir.new_token``). Every
process the tests start directly (``subprocess.Popen``: ``run_cli``, ``start_cli``, the tests'
own) is recorded with the wall clock just before it was forked and just after it was reaped.
From fork to reap the kernel gives that pid to no other process (a zombie keeps it), and an
``exec`` (``unshare``, ``sh -c 'exec ...'``) keeps it: so a token whose pid is such a child's and
whose time lies in that span was made by that child. Nothing else is counted, so no other
runner's group can fail the session; a runner the tests start through a process of their own (a
shell loop, a forked caller) is not seen. A child still running at the end (the API's runner
service, which ends with the test process) has its groups left to it.

``PROCESSKIT_TEST_LEAK_CHECK=0`` turns the check off; ``PROCESSKIT_TEST_LEAK_SETTLE`` is how long
(seconds, 5) the groups of runners still exiting are waited for.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from run_groups import PREFIX, token_of

SETTLE_SECONDS = float(
    os.environ.get("PROCESSKIT_TEST_LEAK_SETTLE", "5")
)  # a runner still exiting: its groups go within this
# Each child: [pid, ns before its fork, ns after it was reaped (None: not yet), the test that
# started it]; by the id of its Popen while that lives (a Popen is only collected once reaped).
_spawned: list[list] = []
_by_popen: dict[int, list] = {}
_current = ["(no test)"]


def cgroup_roots() -> list[str]:
    """The mount points of every cgroup hierarchy (v1 and v2) this process sees."""
    roots = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as handle:
            for line in handle:
                fields = line.split()
                fstype = fields[fields.index("-") + 1]
                if fstype in ("cgroup", "cgroup2"):
                    roots.append(fields[4].replace("\\040", " "))
    except (OSError, ValueError, IndexError):
        pass
    return roots


def host_groups() -> set[str]:
    """Every ``processkit-run-*`` group in every hierarchy (a v1 memory group sits under its
    runner's own group, at any depth; a run's process may make groups below its own)."""
    found = set()
    for root in cgroup_roots():
        for directory, names, _ in os.walk(root):
            found.update(os.path.join(directory, name) for name in names if name.startswith(PREFIX))
    return found


def child_of(group: str, spawned: list[list], now: int) -> list | None:
    """The session's child that made ``group`` (see the module's facts), else None."""
    token = token_of(group)
    if token is None:
        return None
    pid, at = token
    for child in spawned:
        child_pid, forked, reaped, _ = child
        if child_pid == pid and forked <= at <= (now if reaped is None else reaped):
            return child
    return None


def running(child: list) -> bool:
    """Whether the child is still running (not reaped, not a zombie): a live runner's groups are
    its own to remove when it ends (the API's runner service, whose idle groups wait for its next
    run, ends with the test process)."""
    if child[2] is not None:
        return False
    try:
        with open(f"/proc/{child[0]}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _record_reaped(original):
    def handle_exitstatus(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        child = _by_popen.pop(id(self), None)
        if child is not None:
            child[2] = time.time_ns()
        return result

    return handle_exitstatus


def _record_spawned(original):
    def init(self, *args, **kwargs):
        forked = time.time_ns()
        original(self, *args, **kwargs)
        child = [self.pid, forked, None, _current[0]]
        _spawned.append(child)
        _by_popen[id(self)] = child

    return init


def pytest_runtest_logstart(nodeid: str, location) -> None:
    _current[0] = nodeid


@pytest.fixture(scope="session", autouse=True)
def leaves_no_group():
    """Fail the session naming the groups its runners left (see the module's facts)."""
    if os.environ.get("PROCESSKIT_TEST_LEAK_CHECK") == "0":
        yield
        return
    before = host_groups()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "__init__", _record_spawned(subprocess.Popen.__init__))
        patch.setattr(subprocess.Popen, "_handle_exitstatus", _record_reaped(subprocess.Popen._handle_exitstatus))
        yield
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        now = time.time_ns()
        made = {group: child_of(group, _spawned, now) for group in sorted(host_groups() - before)}
        left = {group: child[3] for group, child in made.items() if child is not None and not running(child)}
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    if left:
        lines = "\n".join(f"  {group}  (a runner {test} started)" for group, test in left.items())
        pytest.fail(f"the session left {len(left)} cgroup(s) of its runners on the host:\n{lines}", pytrace=False)
