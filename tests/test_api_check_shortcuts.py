"""``processkit.check_output`` and ``check_call``, which code moving from subprocess calls and
which the API did not have (an ``AttributeError``): each checked against subprocess's own, for
what it returns, what it raises and what it refuses."""

from __future__ import annotations

import subprocess

import pytest

import processkit

FAILS = ["sh", "-c", "echo out; exit 3"]


@pytest.mark.parametrize("module", [subprocess, processkit], ids=["subprocess", "processkit"])
def test_as_subprocess(module, tmp_path):
    assert module.check_output(["echo", "x"], cwd=tmp_path) == b"x\n"
    assert module.check_output(["cat"], input="é", text=True, cwd=tmp_path) == "é"
    assert module.check_output(["cat"], input=None, cwd=tmp_path) == b""
    assert module.check_output("echo $((1+2))", shell=True, cwd=tmp_path) == b"3\n"
    with pytest.raises(subprocess.CalledProcessError) as raised:
        module.check_output(FAILS, cwd=tmp_path)
    assert (raised.value.returncode, raised.value.cmd, raised.value.output) == (3, FAILS, b"out\n")
    assert module.check_call(["true"], cwd=tmp_path) == 0
    with pytest.raises(subprocess.CalledProcessError) as raised:
        module.check_call(FAILS, cwd=tmp_path, stdout=subprocess.DEVNULL)
    assert (raised.value.returncode, raised.value.cmd) == (3, FAILS)
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        module.check_output(["sleep", "30"], timeout=1, cwd=tmp_path)
    assert raised.value.timeout == 1
    assert module.check_output(["echo", "x"], capture_output=False, cwd=tmp_path) == b"x\n"
    beside_stdin = {"input": None, "stdin": subprocess.DEVNULL}
    for refused in ({"stdout": subprocess.PIPE}, {"capture_output": True}, {"check": False}, beside_stdin):
        with pytest.raises(ValueError) as raised:
            module.check_output(["true"], cwd=tmp_path, **refused)
        # subprocess's words; the API's end with no period, as all its errors do
        assert str(raised.value).rstrip(".") in (
            "stdout argument not allowed, it will be overridden",
            "stdout and stderr arguments may not be used with capture_output",
            "check argument not allowed, it will be overridden",
            "stdin and input arguments may not both be used",
        )


def test_a_keyword_it_does_not_take_names_the_call(tmp_path):
    with pytest.raises(TypeError, match=r"^check_output\(\) got an unexpected keyword argument 'preexec_fn'"):
        processkit.check_output(["true"], preexec_fn=print, cwd=tmp_path)
