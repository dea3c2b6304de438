"""Three of ``Popen``'s habits a caller moving from ``subprocess`` met that docs/api.md did not
say (its list "What remains different"): ``communicate(input=...)`` on a handle without a stdin
pipe raises where Popen drops the input; a second ``communicate()`` gives the output again where
Popen's raises when only one stream was piped (with two it gives the output again too); a ``TimeoutExpired`` holds ``b""`` for a captured stream that gave nothing yet
where subprocess's holds None. Each is checked against subprocess itself, and against the docs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import processkit

DOCS = Path(__file__).resolve().parent.parent / "docs" / "api.md"
SLEEPS = [sys.executable, "-c", "import time; print('so far', flush=True); time.sleep(60)"]


def _said_in_the_docs(*words: str) -> None:
    text = " ".join(DOCS.read_text(encoding="utf-8").split())
    for said in words:
        assert said in text, said


def test_input_to_a_handle_without_a_stdin_pipe_is_refused_where_popen_drops_it(tmp_path):
    with subprocess.Popen(["true"], cwd=tmp_path) as popen:
        assert popen.communicate(b"lost") == (None, None)
    with processkit.start(["true"], cwd=tmp_path) as handle:
        with pytest.raises(ValueError, match="needs a run started with stdin=PIPE"):
            handle.communicate(b"lost")
    _said_in_the_docs("`communicate(input=...) needs a run started with stdin=PIPE`")


def test_a_second_communicate_gives_the_output_again(tmp_path):
    with subprocess.Popen(["echo", "x"], stdout=subprocess.PIPE, cwd=tmp_path) as popen:
        popen.communicate()
        with pytest.raises(ValueError, match="closed file"):
            popen.communicate()
    with processkit.start(["echo", "x"], stdout=subprocess.PIPE, cwd=tmp_path) as handle:
        assert handle.communicate() == handle.communicate() == (b"x\n", None)
    _said_in_the_docs("a second `communicate()` after one returned gives the same output again")


def test_a_second_communicate_with_two_pipes_gives_the_output_again_in_either(tmp_path):
    """With stdout and stderr piped, Popen's second call gives the output again too (it reads
    through threads or a selector, never the closed file): the docs say so, not that it raises."""
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "cwd": tmp_path}
    with subprocess.Popen(["echo", "x"], **pipes) as popen:
        assert popen.communicate() == popen.communicate() == (b"x\n", b"")
    with processkit.start(["echo", "x"], **pipes) as handle:
        assert handle.communicate() == handle.communicate() == (b"x\n", b"")
    _said_in_the_docs("when only one stream was piped (with two or more it gives the output again too)")


def test_a_timeout_holds_empty_bytes_for_a_stream_that_gave_nothing(tmp_path):
    caught = []
    for call in (subprocess.run, processkit.run):
        with pytest.raises(subprocess.TimeoutExpired) as raised:
            call(SLEEPS, capture_output=True, timeout=1, cwd=tmp_path)
        caught.append((raised.value.stdout, raised.value.stderr))
    assert caught == [(b"so far\n", None), (b"so far\n", b"")]
    _said_in_the_docs('A `TimeoutExpired` holds `b""`', "subprocess's holds None until a first chunk came")
