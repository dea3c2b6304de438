"""A caller that changes who it is after its runner service started (a daemon started as root
that drops to an unprivileged user before it runs what it was asked to) has its later runs'
children run as the user it is now, as a ``subprocess`` child would: the service, started as
root, went on serving it, and every later child ran as root."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

import processkit

PY = sys.executable
NOBODY = 65534

# The first call starts the service as root; the caller then drops to nobody and runs again.
CALLER = r"""
import json, os, sys, processkit
nobody = int(sys.argv[1])
os.chdir("/")
before = processkit.run(["id", "-u"], capture_output=True, text=True)
os.setgroups([])
os.setgid(nobody)
os.setuid(nobody)
after = processkit.run(["id", "-u"], capture_output=True, text=True)
print(json.dumps({
    "before": before.stdout.strip(),
    "after": after.stdout.strip(),
    "new_service": after.runner_pid != before.runner_pid,
}))
"""


def _python_for_both(env: dict) -> str:
    """A Python that both root and the unprivileged user can run processkit with (the service
    the caller starts once it dropped is that user's, started with the caller's Python)."""
    probe = (
        "import processkit.service.serve, subprocess, sys; subprocess.run([sys.executable, '-c', 'pass'], check=True)"
    )
    for python in (PY, "/usr/bin/python3"):
        as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python, "-c", probe]
        if subprocess.run(as_nobody, capture_output=True, env=env, cwd="/").returncode == 0:
            return python
    pytest.skip("no Python with processkit that an unprivileged user can run here")


def _python_and_env(tmp_path) -> tuple[str, dict]:
    """``_python_for_both`` and the environment it runs under: its places in ``tmp_path``, the
    registry unnamed (root's, refused to the user: it runs unregistered)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(processkit.__file__)))
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path), "HOME": str(tmp_path), "PYTHONPATH": package}
    env.pop("PROCESSKIT_CLI_REGISTRY_DIR", None)
    return _python_for_both(env), env


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to drop to another user")
def test_a_caller_that_dropped_to_another_user_runs_its_children_as_that_user(tmp_path):
    python, env = _python_and_env(tmp_path)
    done = subprocess.run([python, "-c", CALLER, str(NOBODY)], capture_output=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["before"] == "0"
    assert seen["after"] == str(NOBODY), "the child runs as the caller is now, not as its service was started"
    assert seen["new_service"], "a service of the caller's new user carries it"


# The caller drops to nobody, then (compromised, say) writes a frame of its own on the socket it
# still holds to the service root started: a pickle that makes whoever reads it create a file.
# The service, root's, read it as its caller's request and ran the pickle's code as root. Now
# what comes from a sender other than the one it was started by is never read: it ends, as on
# its caller's end of file.
LINGERING = r"""
import json, os, sys, time, processkit
from processkit.api import shared, wire
nobody, made = int(sys.argv[1]), sys.argv[2]
os.chdir("/")
processkit.run(["true"])
service = shared.connection()
os.setgroups([])
os.setgid(nobody)
os.setuid(nobody)

class Payload:
    def __reduce__(self):
        return (os.mkdir, (made,))

wire.send(service.sock, Payload())
deadline = time.monotonic() + 120
while not os.path.exists(made) and service.process.poll() is None and time.monotonic() < deadline:
    time.sleep(0.01)
print(json.dumps({"ran_as_root": os.path.exists(made), "service_ended": service.process.poll() is not None}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to drop to another user")
def test_a_frame_written_after_the_caller_dropped_its_user_is_never_read_by_roots_service(tmp_path):
    python, env = _python_and_env(tmp_path)
    place = tempfile.mkdtemp(prefix="pk-credentials-")  # where the caller, once nobody, can look
    try:
        os.chmod(place, 0o755)
        made = os.path.join(place, "made-by-the-service")
        done = subprocess.run([python, "-c", LINGERING, str(NOBODY), made], capture_output=True, timeout=180, env=env)
        assert done.returncode == 0, done.stderr.decode()
        seen = json.loads(done.stdout)
        assert seen == {"ran_as_root": False, "service_ended": True}, seen
        assert not os.path.exists(made)
    finally:
        shutil.rmtree(place)


# A setgid-style caller (its effective group not its real one) lowers its CPU limit after its
# first call. Its limits used to be read by the service with prlimit, which the kernel refuses
# unless all the target's ids are the reader's real ones: its children ran with no limit at all.
SETGID = r"""
import json, resource, subprocess, processkit
processkit.run(["true"])
resource.setrlimit(resource.RLIMIT_CPU, (50, 50))
SAY = ["sh", "-c", "ulimit -t"]
print(json.dumps({
    "run": processkit.run(SAY, capture_output=True, text=True).stdout.strip(),
    "subprocess": subprocess.run(SAY, capture_output=True, text=True).stdout.strip(),
}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to start a caller under another user's ids")
def test_a_setgid_callers_limits_reach_its_children(tmp_path):
    python, env = _python_and_env(tmp_path)
    ids = [f"--ruid={NOBODY}", f"--euid={NOBODY}", f"--rgid={NOBODY}", "--egid=100", "--clear-groups"]
    done = subprocess.run(["setpriv", *ids, python, "-c", SETGID], capture_output=True, timeout=180, env=env, cwd="/")
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout) == {"run": "50", "subprocess": "50"}


# A start() handle from before the drop: its stream's scratch file is the old (root's) service's.
# Removing it as the caller is now was refused, and the PermissionError reached the user as a
# traceback at exit (or from the handle's wait).
HANDLE = r"""
import json, os, sys, processkit
nobody = int(sys.argv[1])
os.chdir("/")
handle = processkit.start(["true"])
os.setgroups([])
os.setgid(nobody)
os.setuid(nobody)
print(json.dumps({"code": handle.wait(), "after": processkit.run(["id", "-u"], capture_output=True, text=True).stdout}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to drop to another user")
def test_a_handle_from_before_a_drop_of_user_ends_without_a_traceback(tmp_path):
    python, env = _python_and_env(tmp_path)
    done = subprocess.run([python, "-c", HANDLE, str(NOBODY)], capture_output=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout) == {"code": 0, "after": f"{NOBODY}\n"}
    assert done.stderr == b"", done.stderr.decode()


# A caller whose environment names another temp directory gets a fresh service; the one it
# replaced, with nothing in flight, is ended and collected then, not left a zombie until the
# caller's next subprocess.
REPLACED = r"""
import os, sys, processkit
from processkit.api import service, shared
service.COLLECT_SECONDS = 60.0  # a loaded machine's slow exit is waited for: only a missed retire fails
processkit.run(["true"])
old = shared.connection().process.pid
os.environ["TMPDIR"] = sys.argv[1]
processkit.run(["true"])
try:
    with open(f"/proc/{old}/stat") as stat:
        print(stat.read().rsplit(")", 1)[1].split()[0])
except FileNotFoundError:
    print("collected")
"""


def test_a_replaced_service_is_collected_not_left_a_zombie(tmp_path):
    done = subprocess.run([PY, "-c", REPLACED, str(tmp_path)], capture_output=True, timeout=180, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "collected\n"
