"""What a caller moving from ``subprocess`` met (two API reviews): ``RunHandle`` had no ``args``
(``Popen.args``); ``RunError``'s text for a death by signal said ``ended with code -9`` where
``CalledProcessError`` says ``died with <Signals.SIGKILL: 9>``; ``input=`` refused an ``mmap``;
``ServiceGone`` had no ``code``; a forked child's wait on a handle of its parent's was told the
runner service of this process had ended (the parent's goes on); and docs/api.md named five of the
fifteen ``Popen`` keywords the calls do not take."""

from __future__ import annotations

import array
import json
import mmap
import re
import subprocess
import sys
from pathlib import Path

import pytest

import processkit
from conftest import SAFETY_NET, reaped, run_cli, start_cli, wait_for_event

DOCS = Path(__file__).resolve().parent.parent / "docs" / "api.md"


def test_a_handle_has_popen_args_the_list_its_result_holds(tmp_path):
    with processkit.start("echo hi", shell=True, stdout=subprocess.DEVNULL, cwd=tmp_path) as handle:
        assert handle.args == ["/bin/sh", "-c", "echo hi"]
        assert handle.wait() == 0
        assert handle.args == handle.result().args


def test_a_run_error_for_a_signal_says_it_as_subprocess_does(tmp_path):
    argv = ["sh", "-c", "kill -9 $$"]
    try:
        processkit.run(argv, check=True, capture_output=True, cwd=tmp_path)
    except processkit.RunError as exc:
        words = str(exc)
    try:
        subprocess.run(argv, check=True, capture_output=True, cwd=tmp_path)
    except subprocess.CalledProcessError as exc:
        theirs = str(exc)
    assert "died with <Signals.SIGKILL: 9>" in theirs
    assert f"of {argv!r} died with <Signals.SIGKILL: 9> (source: child_exit)" in words, words
    try:
        processkit.run(["sh", "-c", "exit 3"], check=True, capture_output=True, cwd=tmp_path)
    except processkit.RunError as exc:
        assert "ended with code 3 (source: child_exit)" in str(exc)


def test_input_takes_any_bytes_like_object(tmp_path):
    with mmap.mmap(-1, 5) as mapped:
        mapped.write(b"hello")
        assert processkit.run(["cat"], input=mapped, capture_output=True, cwd=tmp_path).stdout == b"hello"
        numbers = array.array("H", [0x6968, 0x0A21])  # "hi!\n" on a little-endian host
        expected = numbers.tobytes()
        assert processkit.run(["cat"], input=numbers, capture_output=True, cwd=tmp_path).stdout == expected
    with pytest.raises(TypeError, match="^input must be a bytes-like object or a str, not int$"):
        processkit.run(["cat"], input=5, capture_output=True, cwd=tmp_path)


GONE = r"""
import json, os, signal, processkit
from processkit.api import service
handle = processkit.start(["sleep", "3737.5"])
os.kill(handle.runner_pid, signal.SIGKILL)
try:
    handle.wait()
    seen = None
except service.ServiceGone as exc:
    seen = [str(exc), exc.code]
print(json.dumps(seen))
"""


def test_a_service_gone_under_a_call_has_the_internal_code(tmp_path):
    try:
        done = subprocess.run(
            [sys.executable, "-c", GONE], capture_output=True, text=True, timeout=SAFETY_NET, cwd=tmp_path
        )
    finally:  # the killed service's groups, which its successor's sweep spares for a grace
        pruned = run_cli("prune", cwd=tmp_path)
    assert pruned.returncode == 0, pruned.stderr
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["the runner service of this process has ended", 104]


FORKED = r"""
import json, os, subprocess, processkit
from processkit.api import service
handle = processkit.start(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
pid = os.fork()
if pid == 0:
    try:
        handle.wait()
        seen = None
    except service.ServiceGone as exc:
        seen = [str(exc), exc.code]
    own = processkit.run(["true"]).runner_pid != handle.runner_pid
    print(json.dumps([seen, own, os.getppid()]), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
handle.stdin.close()
assert handle.wait() == 0
"""


def test_a_forked_childs_wait_on_the_parents_service_says_whose_it_is_with_usages_code(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", FORKED], capture_output=True, text=True, timeout=SAFETY_NET, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    (text, code), own, parent = json.loads(done.stdout)
    assert text.startswith(f"the runner service of process {parent}, which this process was forked from,"), text
    assert "has ended" not in text
    assert (code, own) == (100, True)


def test_the_popen_keywords_not_taken_are_those_the_docs_list(tmp_path):
    # read in a fresh interpreter: under pytest a plugin may have wrapped Popen's __init__
    signature = "import inspect, subprocess; print(*inspect.signature(subprocess.Popen.__init__).parameters)"
    names = subprocess.run([sys.executable, "-c", signature], capture_output=True, text=True, check=True).stdout
    refused = set()
    for name in names.split()[2:]:  # self, args (the command)
        try:
            processkit.run(["true"], **{"cwd": tmp_path, name: None})
        except TypeError as exc:
            if "unexpected keyword argument" in str(exc):
                refused.add(name)
    said = re.search(r"are not taken \(a `TypeError`.*?runner's:(.*?)\(`tests/", DOCS.read_text(), re.S)
    assert said is not None
    assert set(re.findall(r"`(\w+)`", said.group(1))) == refused


@pytest.mark.parametrize("raw", [False, True])
def test_an_attached_runs_args_are_its_streams_argv_once_ended(tmp_path, raw):
    """The CLI redacts a run's argv in its stream unless ``--argv-raw``: an attached handle's
    ``args`` is None while live, and stays None for a redacted run once it ended."""
    jsonl, run_id = tmp_path / "cli.jsonl", f"api-args-{'raw' if raw else 'redacted'}"
    flags = ["--argv-raw"] if raw else []
    with reaped(start_cli("run", "--jsonl", jsonl, "--run-id", run_id, *flags, "--no-echo", "--", "sleep", "3737.25")):
        wait_for_event(jsonl, "run_started")
        handle = processkit.attach(run_id)
        assert handle.args is None
        handle.cancel()
        assert handle.result(timeout=SAFETY_NET).returncode == 108
        assert handle.args == (["sleep", "3737.25"] if raw else None)
