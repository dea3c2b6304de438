"""A str argument holding undecoded bytes (``"\\udcff"``, ``surrogateescape``'s form) is taken as
``subprocess.run`` takes it (``os.fsencode``): the child gets those bytes, through the real
service, with ``jsonl=`` or without, by ``run``, by ``start`` and in a ``batch`` job's ``args``. A
surrogate that stands for no byte (``"\\ud800"``) is still refused, as subprocess refuses it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import processkit
from conftest import read_events

ODD = ["\udcff", "a\udc80b", "caf\udce9", "ok \u00e9"]  # undecoded bytes, and plain text beside them
SHOW = "import os, sys; sys.stdout.buffer.write(b'\\0'.join(map(os.fsencode, sys.argv[1:])))"


def test_undecoded_bytes_in_a_str_argument_reach_the_child_as_those_bytes(tmp_path, isolated_registry):
    wanted = b"\0".join(map(os.fsencode, ODD))
    assert subprocess.run([sys.executable, "-c", SHOW, *ODD], capture_output=True).stdout == wanted
    done = processkit.run([sys.executable, "-c", SHOW, *ODD], capture_output=True, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, wanted), done
    assert done.args[3:] == ODD, "the args as given, as subprocess's result holds them"

    stream = tmp_path / "run.jsonl"
    named = processkit.run([sys.executable, "-c", SHOW, *ODD], capture_output=True, jsonl=stream, cwd=tmp_path)
    assert named.stdout == wanted
    lines = read_events(stream)
    assert lines[0]["event"] == "run_started" and lines[-1]["event"] == "runner_exit" and lines[-1]["code"] == 0

    with processkit.start([sys.executable, "-c", SHOW, *ODD], stdout=subprocess.PIPE, cwd=tmp_path) as handle:
        assert handle.stdout.read() == wanted
        assert handle.wait() == 0


def test_a_batch_job_s_args_take_undecoded_bytes_as_run_does(tmp_path, isolated_registry):
    """As a template's jobs, whose arguments come from the OS: the job's child gets the bytes."""
    job = {"args": [sys.executable, "-c", SHOW, *ODD], "id": "odd", "cwd": str(tmp_path)}
    lines = processkit.batch([job], out=tmp_path / "out")
    assert [(line["id"], line["exit_code"], line["command"][3:]) for line in lines] == [("odd", 0, ODD)]
    assert (tmp_path / "out" / "odd" / "capture" / "stdout.log").read_bytes() == b"\0".join(map(os.fsencode, ODD))


@pytest.mark.parametrize("text", ["\ud800", "\udc7f"])
def test_a_surrogate_that_is_no_byte_is_refused_as_subprocess_refuses_it(text, tmp_path, isolated_registry):
    with pytest.raises(UnicodeEncodeError):
        subprocess.run(["true", text])
    with pytest.raises(ValueError, match=r"args item 1 holds a lone surrogate"):
        processkit.run(["true", text])
    with pytest.raises(ValueError, match=r"jobs\[0\]: args item 1 holds a lone surrogate"):
        processkit.batch([{"args": ["true", text]}], out=tmp_path / "never")
    assert not (tmp_path / "never").exists()
