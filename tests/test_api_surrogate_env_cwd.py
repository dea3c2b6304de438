"""``env`` keys and values and ``cwd`` as str holding undecoded bytes (what ``os.environ`` and
``os.getcwd()`` hand back in a directory or an environment that is not UTF-8) are taken as
``subprocess.run`` takes them (``os.fsencode``): the child, started by the real service, gets
those bytes, by ``run``, ``start`` and a ``batch`` job. A surrogate that stands for no byte
(``"\\ud800"``) is still refused, as subprocess refuses it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import processkit

# The child's variables named ODD* and its directory, as bytes.
SHOW = (
    "import os, sys; sys.stdout.buffer.write(repr((sorted((k, v) for k, v in os.environb.items()"
    " if k.startswith(b'ODD')), os.getcwdb())).encode())"
)
ENV = {"ODD": "v\udcff", "ODD\udce9": "caf\udce9 \u00e9", "PWD": "/tmp/dir\udcff"}


def wanted(cwd: str) -> bytes:
    odd = sorted((os.fsencode(key), os.fsencode(value)) for key, value in ENV.items() if key.startswith("ODD"))
    return repr((odd, os.fsencode(cwd))).encode()


@pytest.fixture
def odd_dir(tmp_path) -> str:
    """A directory whose name is not UTF-8, as ``os.getcwd()`` names it there."""
    made = os.path.join(os.fsencode(tmp_path), b"dir\xff")
    os.mkdir(made)
    return os.fsdecode(made)


def test_undecoded_bytes_in_env_and_cwd_reach_the_child_as_those_bytes(odd_dir, isolated_registry):
    command = [sys.executable, "-c", SHOW]
    env = {**os.environ, **ENV}
    assert subprocess.run(command, env=env, cwd=odd_dir, capture_output=True).stdout == wanted(odd_dir)
    done = processkit.run(command, env=env, cwd=odd_dir, capture_output=True)
    assert (done.returncode, done.stdout) == (0, wanted(odd_dir)), done
    added = processkit.run(command, env_add=ENV, cwd=odd_dir, capture_output=True)
    assert added.stdout == wanted(odd_dir)
    with processkit.start(command, env=env, cwd=odd_dir, stdout=subprocess.PIPE) as handle:
        assert handle.stdout.read() == wanted(odd_dir)
        assert handle.wait() == 0


def test_a_batch_job_s_env_and_cwd_take_undecoded_bytes_as_run_does(odd_dir, tmp_path, isolated_registry):
    job = {"args": [sys.executable, "-c", SHOW], "id": "odd", "cwd": odd_dir, "env": ENV}
    lines = processkit.batch([job], out=tmp_path / "out")
    assert [(line["id"], line["exit_code"]) for line in lines] == [("odd", 0)]
    assert (tmp_path / "out" / "odd" / "capture" / "stdout.log").read_bytes() == wanted(odd_dir)


@pytest.mark.parametrize("text", ["\ud800", "\udc7f"])
def test_a_surrogate_that_is_no_byte_in_env_or_cwd_is_refused(text, tmp_path, isolated_registry):
    with pytest.raises(UnicodeEncodeError):
        subprocess.run(["true"], env={"A": text})
    carried = "which no argument, environment or path can carry"
    with pytest.raises(ValueError, match=rf"the value of 'A' in env holds a lone surrogate .*, {carried}"):
        processkit.run(["true"], env={"A": text})
    with pytest.raises(ValueError, match=rf"cwd holds a lone surrogate .*, {carried}"):
        processkit.run(["true"], cwd=f"/tmp{text}")
    with pytest.raises(ValueError, match=r"jobs\[0\]: .*holds a lone surrogate"):
        processkit.batch([{"args": ["true"], "env": {"A": text}}], out=tmp_path / "never")
    assert not (tmp_path / "never").exists()
