"""processkit.run and start as subprocess.run and Popen (issue 47, the Python API): every byte
asked for, a cap that cuts said aloud, env= replacing the environment, stderr=STDOUT, files and
descriptors for the streams, shell=True, and start()'s Popen shape, each side by side with what
subprocess does for the same call."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import warnings

import pytest

import processkit
from conftest import SAFETY_NET, pid_alive

PY = sys.executable
INTERLEAVED = "import sys\nfor i in range(3):\n    sys.stdout.write(f'out{i}\\n'); sys.stdout.flush()\n    sys.stderr.write(f'err{i}\\n'); sys.stderr.flush()"


def test_capture_output_gives_every_byte_silently():
    argv = ["head", "-c", "20000000", "/dev/zero"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # CaptureTruncated among them: nothing was cut
        result = processkit.run(argv, capture_output=True)
    expected = subprocess.run(argv, capture_output=True)
    assert (result.returncode, len(result.stdout), result.stdout_capture.truncated) == (0, 20_000_000, False)
    assert result.stdout == expected.stdout


def test_a_cap_that_cuts_is_loud():
    argv = ["head", "-c", "5000", "/dev/zero"]
    with pytest.warns(processkit.CaptureTruncated, match="stdout cut by capture_max_bytes: 4000 of 5000 bytes lost"):
        result = processkit.run(argv, stdout=subprocess.PIPE, capture_max_bytes=1000)
    assert (result.returncode, len(result.stdout)) == (0, 1000)
    with pytest.warns(processkit.CaptureTruncated), pytest.raises(processkit.RunError, match="4000 of 5000 bytes lost"):
        processkit.run(argv, capture_output=True, capture_max_bytes=1000, check=True)


def test_a_failed_capture_write_is_as_loud_as_a_cap(tmp_path):
    """A capture file no write reaches (here ``/dev/full``: a full disk) left the output asked for
    short, with no warning and ``check=True`` content: only ``write_error`` said it."""
    (tmp_path / "stdout.log").symlink_to("/dev/full")
    argv = ["sh", "-c", "echo hello"]
    with pytest.warns(
        processkit.CaptureTruncated, match="stdout cut by a failed write to its capture file: 6 of 6"
    ) as said:
        result = processkit.run(argv, capture_output=True, capture_dir=str(tmp_path))
    assert [w.category for w in said if issubclass(w.category, processkit.CaptureTruncated)] == [
        processkit.CaptureWriteFailed
    ], "told apart from a cap's cut"
    assert result.returncode == 0 and result.stdout_capture.write_error
    with pytest.warns(processkit.CaptureTruncated), pytest.raises(processkit.RunError, match="6 of 6 bytes lost"):
        processkit.run(argv, capture_output=True, capture_dir=str(tmp_path), check=True)


def test_a_capture_past_its_cap_and_hit_by_a_failed_write_names_the_failed_write(tmp_path):
    """Both at once (a full disk below the cap): the warning said the cap alone, as if the file
    held the stream up to it."""
    (tmp_path / "stdout.log").symlink_to("/dev/full")
    with pytest.warns(processkit.CaptureTruncated, match="stdout cut by a failed write to its capture file: 6 of 6"):
        processkit.run(["sh", "-c", "echo hello"], capture_output=True, capture_dir=str(tmp_path), capture_max_bytes=3)


def test_env_replaces_the_environment_as_subprocess_does_and_env_add_adds():
    show = [PY, "-c", "import os, sys; sys.stdout.write(repr(sorted(os.environ)))"]
    given = {"ONLY": "this", "PATH": os.environ["PATH"]}
    ours = processkit.run(show, env=given, capture_output=True, text=True).stdout
    assert ours == subprocess.run(show, env=given, capture_output=True, text=True).stdout
    assert "HOME" in os.environ and "HOME" not in ours
    added = processkit.run(show, env_add={"ADDED": "1"}, capture_output=True, text=True).stdout
    assert "ADDED" in added and "HOME" in added
    both = processkit.run(
        [*show[:2], "import os; print(os.environ['A'], len(os.environ))"],
        env={"A": "1"},
        env_add={"A": "2"},
        capture_output=True,
        text=True,
    )
    theirs = subprocess.run(both.args, env={"A": "2"}, capture_output=True, text=True).stdout
    assert both.stdout == theirs and theirs.startswith("2 "), "env_add after env, nothing else"


def test_stderr_to_stdout_keeps_the_order_of_arrival():
    ours = processkit.run([PY, "-c", INTERLEAVED], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    theirs = subprocess.run([PY, "-c", INTERLEAVED], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert ours.stdout == theirs.stdout == "out0\nerr0\nout1\nerr1\nout2\nerr2\n"
    assert ours.stderr is None


def test_files_and_descriptors_for_the_streams(tmp_path):
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with open(out, "wb") as file, open(err, "wb") as errors:
        result = processkit.run([PY, "-c", INTERLEAVED], stdout=file, stderr=errors.fileno())
    assert result.returncode == 0
    assert (out.read_text(), err.read_text()) == ("out0\nout1\nout2\n", "err0\nerr1\nerr2\n")
    with open(out, "wb") as file:
        processkit.run([PY, "-c", INTERLEAVED], stdout=file, stderr=subprocess.STDOUT)
    assert out.read_text() == "out0\nerr0\nout1\nerr1\nout2\nerr2\n"
    (tmp_path / "in.txt").write_bytes(b"from a file")
    with open(tmp_path / "in.txt", "rb") as source:
        fed = processkit.run(["cat"], stdin=source, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert fed.stdout == b"from a file"


def test_shell_true_runs_the_string_with_bin_sh():
    for call in (processkit.run, subprocess.run):
        done = call("echo $((6 * 7)) $0; exit 3", shell=True, capture_output=True, text=True)
        assert (done.returncode, done.stdout) == (3, "42 /bin/sh\n")


def test_start_is_popen_shaped():
    script = "import os, sys; print(os.getpid(), flush=True); print(sys.stdin.readline().upper(), end='', flush=True); sys.exit(4)"
    handle = processkit.start([PY, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert handle.returncode is None and handle.poll() is None
    assert int(handle.stdout.readline()) == handle.pid, "pid is the child's, its output streamed while it runs"
    out, err = handle.communicate("shout\n", timeout=60)
    assert (out, err, handle.returncode, handle.wait(), handle.result().returncode) == ("SHOUT\n", None, 4, 4, 4)


def test_send_signal_reaches_the_child_and_terminate_stops_the_tree():
    with processkit.start(["sleep", "300"]) as handle:
        handle.send_signal(signal.SIGUSR1)
        assert handle.wait(timeout=60) == -signal.SIGUSR1
    handle = processkit.start(["sh", "-c", "sleep 300 & echo $!; wait"], stdout=subprocess.PIPE)
    grandchild = int(handle.stdout.readline())
    handle.terminate()
    assert handle.wait(timeout=60) == -signal.SIGTERM, "Popen's code, not the CLI's 108"
    assert (handle.result().exit_code, handle.result().source) == (108, "control_cancel")
    assert not pid_alive(grandchild), "the soft stop reached the whole tree"
    assert handle.stdout.read() == b"" and handle.communicate() == (b"", None)
    handle.stdout.close()
    killed = processkit.start(["sleep", "300"])
    killed.kill()
    assert killed.wait(timeout=60) == -signal.SIGKILL and killed.result().exit_code == 109


def test_communicate_timeout_keeps_what_came_and_goes_on():
    script = (
        "import signal; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1}); print('early', flush=True); "
        "signal.sigwait({signal.SIGUSR1}); print('late')"
    )
    handle = processkit.start([PY, "-c", script], stdout=subprocess.PIPE)
    while True:
        with pytest.raises(subprocess.TimeoutExpired) as expired:
            handle.communicate(timeout=0.1)
        if expired.value.stdout == b"early\n":  # what came so far, kept for the next call
            break
    handle.send_signal(signal.SIGUSR1)
    assert handle.communicate(timeout=60) == (b"early\nlate\n", None) and handle.returncode == 0


MEMORY = r"""
import json, os, resource, processkit
from processkit.api import shared
processkit.run(["true"])
connection = shared.connection()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
result = processkit.run(["head", "-c", str(64 << 20), "/dev/zero"], capture_output=True)
assert len(result.stdout) == 64 << 20
with open(f"/proc/{connection.pid}/status") as status:
    service_peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM"))
print(json.dumps({"caller": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before, "service": service_peak,
                  "scratch": os.listdir(connection.scratch)}))
"""


def test_a_large_output_is_held_once_as_subprocess_holds_it():
    """64 MiB asked for: the caller holds it once (subprocess holds it about twice while it joins
    the chunks), the runner service never holds it (it was copied through both processes, about
    three times in each), and the scratch capture is gone once read."""
    found = json.loads(subprocess.run([PY, "-c", MEMORY], capture_output=True, text=True, check=True).stdout)
    assert found["caller"] < 100 << 10, f"the caller's peak grew {found['caller']} KiB for 64 MiB"
    assert found["service"] < 48 << 10, f"the runner service's peak is {found['service']} KiB"
    assert found["scratch"] == []


def test_the_childs_stdin_is_dev_null_unless_given():
    """Unlike a subprocess child, which inherits it, the run's child never reads the caller's stdin
    unless handed it (docs/api.md, "What remains different")."""
    script = (
        "import sys, processkit\n"
        "print(processkit.run(['cat'], capture_output=True).stdout)\n"
        "print(processkit.run(['cat'], capture_output=True, stdin=sys.stdin).stdout)\n"
        "print(processkit.run(['readlink', '/proc/self/fd/0'], capture_output=True).stdout)\n"
    )
    done = subprocess.run([PY, "-c", script], input=b"the caller's input", capture_output=True, timeout=SAFETY_NET)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [b"b''", b'b"the caller\'s input"', b"b'/dev/null\\n'"]
