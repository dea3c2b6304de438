"""A process that used the API left its runner service's socket and Popen to the interpreter's
last collection: a pytest run of the caller's own tests that used ``pytest.warns`` anywhere
ended with ``ResourceWarning: subprocess N is still running`` and ``unclosed <socket.socket ...>``
(as tests/test_api_streams.py did). At exit a service no call uses is now closed (it ends on its
own, as at the exit) and never waited for; nothing is left to warn."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import SAFETY_NET

CALLERS_TESTS = """
import subprocess, sys, warnings

import pytest

import processkit


def test_run_and_a_warning_looked_for():
    processkit.run([sys.executable, "-c", "print(1)"], capture_output=True)
    with pytest.warns(UserWarning):
        warnings.warn("looked for")


def test_a_started_run_communicated():
    handle = processkit.start([sys.executable, "-c", "print(2)"], stdout=subprocess.PIPE)
    assert handle.communicate()[0] == b"2\\n"
"""


@pytest.mark.parametrize("selected", ["test_run_and_a_warning_looked_for", "test_a_started_run_communicated"])
def test_a_callers_pytest_run_ends_without_a_resource_warning(tmp_path, selected):
    (tmp_path / "test_callers.py").write_text(CALLERS_TESTS)
    command = [sys.executable, "-W", "error::ResourceWarning", "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*command, f"test_callers.py::{selected}"], cwd=tmp_path, capture_output=True, text=True, timeout=SAFETY_NET
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ResourceWarning" not in done.stdout + done.stderr, done.stderr


# A thread that used the API is still alive at the exit: the interpreter's last collection, not the
# thread's end, would have met its service (as in a server whose worker threads are daemons).
THREAD_LEFT_RUNNING = """
import threading

import processkit

ran, never = threading.Event(), threading.Event()


def worker():
    processkit.run(["true"])
    ran.set()
    never.wait()


threading.Thread(target=worker, daemon=True).start()
ran.wait()
"""


def test_a_script_whose_daemon_thread_ran_ends_without_one_under_dev_mode(tmp_path):
    """Before, ``-X dev`` printed ``subprocess N is still running`` and ``unclosed <socket...>``
    at the exit of every such script (a daemon thread between calls at the exit)."""
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", THREAD_LEFT_RUNNING],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=SAFETY_NET,
    )
    assert (done.returncode, done.stderr) == (0, "")
