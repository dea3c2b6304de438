"""A process found by its pid is signalled through one place, ``members.signal_found``: pinned by
a pidfd, then shown to be the one found (the same start time, or still in its group), so a pid
handed on meanwhile (the process ended and was collected; a busy host's pids cycle) never takes
the signal meant for a run's process. ``end_descendants`` killed by bare pid: a stranger that got
an escapee's pid between the sweep's look and its kill was killed in its place.

The pid's handing-on is made, not waited for: the run is the init's child in a pid namespace of
its own, and the sweep's read of the escapee's facts is wrapped (the CLI patched as
tests/test_faults.py does) so that the escapee ends, is collected, and the init starts a stranger
under the same pid (``ns_last_pid``), just before that read (``before``: the read is the
stranger's) or just after it (``after``: the read is the escapee's, the kill would be the
stranger's). Another escapee, left alone, is still ended.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import subprocess
import sys

import pytest

import processkit
from conftest import SAFETY_NET, patched_cli
from test_pid_namespace import _unshare_works

PACKAGE = pathlib.Path(processkit.__file__).parent

# Every other kill by pid, and why its pid is the process's own: a child not yet collected keeps
# its pid (``engine``'s root; the native spawn's child; the API's service, which its caller
# collects), this process itself, and ``kill(pid, 0)``, which signals nothing.
OWN_PIDS = {
    "api/handle.py": "a kernel without pidfds: the root, while the run goes on (as Popen)",
    "api/stopped.py": "the caller's own service, not yet waited for",
    "engine/spawn.py": "the child, not yet collected",
    "engine/spawn_native.py": "the child whose exec is not reported yet",
    "engine/tree_end.py": "the run's root, not yet collected",
}


def _kills():
    for path in sorted(PACKAGE.rglob("*.py")):
        name = str(path.relative_to(PACKAGE))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "kill" and len(node.args) == 2:
                yield name, node


def _own(node: ast.Call) -> bool:
    target, signal = node.args
    probe = isinstance(signal, ast.Constant) and signal.value == 0
    itself = isinstance(target, ast.Call) and getattr(target.func, "attr", None) == "getpid"
    return probe or itself


def test_no_process_found_by_its_pid_is_killed_by_bare_pid():
    """``os.kill`` outside ``containment/members.py`` (``signal_found``, whose kernel has no
    pidfds) only where the pid is the process's own (``OWN_PIDS``)."""
    kills = list(_kills())  # the package parsed once
    bare = [
        f"{name}:{node.lineno}"
        for name, node in kills
        if name != "containment/members.py" and name not in OWN_PIDS and not _own(node)
    ]
    assert bare == []
    assert sum(name == "containment/members.py" for name, _ in kills) == 1


# The two scripts below begin with it: serves the wrapped read's request (a pid: that pid's next
# holder, a stranger, is started as this process's child and its pid told, and noted in
# stranger.pid).
SERVE = r"""
import json, os, subprocess, sys, threading, time

def serve(work):
    with open(os.path.join(work, "ask"), "rb") as ask:
        pid = int(ask.readline())
    with open("/proc/sys/kernel/ns_last_pid", "w") as last:
        last.write(str(pid - 1))
    stranger = subprocess.Popen(["sleep", "600"])
    with open(os.path.join(work, "stranger.pid"), "w") as noted:
        noted.write(str(stranger.pid))
    with open(os.path.join(work, "told"), "w") as told:
        told.write(str(stranger.pid))
"""

# The namespace's init: starts the runner (argv after "--"); the stranger is started by the init
# (``by="init"``: none of the runner's tree) or (``by="spared"``) by a process that comes to the
# runner as an orphan of the caller's job (``spared.py``, in a session of its own before the
# runner's exec: ``start_new_session`` is done before the exec ``Popen`` waits for, so the
# runner's first look (``inherited``) finds that session: spared, in the sweep's tree). Once the
# runner has ended it prints {"code": its exit, "stranger": pid, "alive": bool} on stdout (alive
# False: killed, or killed and collected).
INIT = r"""
work, by, command = sys.argv[1], sys.argv[2], sys.argv[sys.argv.index("--") + 1:]
if by == "init":
    threading.Thread(target=serve, args=(work,), daemon=True).start()
    open(os.path.join(work, "server.ready"), "w").close()
else:
    hand = '''
import os, subprocess, sys
quiet = subprocess.DEVNULL
subprocess.Popen([sys.executable, "spared.py", sys.argv[1]], start_new_session=True, stdin=quiet, stdout=quiet, stderr=quiet)
os.execvp(sys.argv[2], sys.argv[2:])
'''
    command = [sys.executable, "-c", hand, work, *command]
runner = subprocess.run(command, cwd=work, capture_output=True)
sys.stderr.buffer.write(runner.stderr)
try:
    stranger = int(open(os.path.join(work, "stranger.pid")).read())
except OSError:
    stranger = None
try:
    alive = open(f"/proc/{stranger}/stat").read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
except OSError:
    alive = False  # killed and collected
print(json.dumps({"code": runner.returncode, "stranger": stranger, "alive": alive}))
"""

# The caller's job, in a session of its own from its start: once the run's escapees are noted it
# forks the server and ends, so the server comes to the runner (its subreaper) after the runner's
# look at what it inherited, then serves.
SPARED = r"""
work = sys.argv[1]
while not os.path.exists(os.path.join(work, "escapee.noted")):
    time.sleep(0.01)
helper = os.getpid()
if os.fork() == 0:
    while os.getppid() == helper:
        time.sleep(0.01)
    open(os.path.join(work, "server.ready"), "w").close()
    serve(work)
    time.sleep(600)  # the stranger its child, never collected: the namespace's end ends both
"""

# The wrapped ``leftovers.read_member``: at its first read of the escapee's pid, the escapee is
# ended and collected, the init asked for a stranger under its pid, and the read is the
# stranger's (``before``) or the escapee's own, taken first (``after``).
SWAP = r"""
import os

def make(real, when):
    done = []

    def read_member(pid):
        with open("escapee.pid") as noted:
            escapee = int(noted.read())
        if done or pid != escapee:
            return real(pid)
        done.append(pid)
        found = real(pid)
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        tick = os.sysconf("SC_CLK_TCK")
        while float(open("/proc/uptime").read().split()[0]) * tick <= int(found.start_time) + 1:
            pass  # the stranger starts a clock tick later than the escapee: a start time tells them apart
        with open("ask", "w") as ask:
            ask.write(f"{pid}\n")
        with open("told") as told:
            assert int(told.read()) == pid, "the stranger did not get the escapee's pid"
        return found if when == "after" else real(pid)

    return read_member
"""

NOTE = "echo $$ > {0}.tmp && mv {0}.tmp {0}.pid && : > {0}.noted"


@pytest.mark.skipif(not _unshare_works(), reason="unshare --pid cannot make a pid namespace here")
@pytest.mark.parametrize(("when", "by"), [("before", "init"), ("after", "init"), ("before", "spared")])
def test_a_pid_handed_on_between_the_sweeps_look_and_its_kill_is_not_killed(tmp_path, monkeypatch, when, by):
    """``by="spared"``: the pid goes to a new child of a process the sweep spares (a later member
    of a session the runner inherited), before the sweep's read: its parent is in the sweep's
    tree and its start time is the one read, so only the spare checks, asked again at the pin,
    leave it alone."""
    monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")  # a setsid escapee outlives the teardown
    (tmp_path / "swap.py").write_text(SWAP)
    (tmp_path / "init.py").write_text(SERVE + INIT)
    (tmp_path / "spared.py").write_text(SERVE + SPARED)
    os.mkfifo(tmp_path / "ask")
    os.mkfifo(tmp_path / "told")
    wrapped = (
        f"__import__('runpy').run_path({str(tmp_path / 'swap.py')!r})['make']"
        f"(__import__('processkit.containment.leftovers', fromlist=['_']).read_member, {when!r})"
    )
    cli = patched_cli("processkit.containment.leftovers", "read_member", wrapped)
    escapees = " ".join(
        f"(setsid sh -c '{NOTE.format(name)}; exec sleep 600' >/dev/null 2>&1 &);" for name in ("escapee", "other")
    )
    script = f"{escapees} while [ ! -e escapee.noted ] || [ ! -e other.noted ] || [ ! -e server.ready ]; do :; done"
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, str(tmp_path / "init.py"), str(tmp_path), by]
        + ["--", *cli, "run", "--jsonl", "run.jsonl", "--", "sh", "-c", script],
        capture_output=True,
        timeout=SAFETY_NET,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    outcome = json.loads(done.stdout.decode().splitlines()[-1])
    assert outcome["code"] == 0, done.stderr.decode(errors="replace")
    assert outcome["stranger"] == int((tmp_path / "escapee.pid").read_text()), done.stderr
    assert outcome["alive"], "the stranger that got the escapee's pid was killed in its place"
    # the other escapee is still ended, and said (the namespace's end would kill it anyway: the
    # warning is what shows the sweep took it)
    assert b"1 process(es) of this run had left its process group" in done.stderr, done.stderr
