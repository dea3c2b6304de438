"""What a command template cannot carry as GNU parallel does is refused (100), through the real
CLI beside the real ``parallel``, where the batch ran the command with other arguments:

- ``{=perl expression=}``: parallel runs it as code (also spread over words, as the shell splits
  ``{= s/a/b/ =}``, and numbered, ``{=1 ...=}``); the batch runs no code, and passed the text on.
  ``{=}``, a lone ``{=`` and ``{={=}``, which parallel leaves as text, stay text.
- an element holding ``{%}`` once filled beyond the template's ``{%}``: the slot filled both
  (``{%}{}`` with the argument ``{%}`` gave ``11``, parallel's ``1{%}``); the extra one may also be
  made of the template's text around ``{}`` (``{{}}{%}`` with ``%``), which no argument holds."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from conftest import run_cli

USAGE = 100
SAID = b"is GNU parallel's Perl expression, and a template here runs no code"


@pytest.mark.parametrize(
    "words",
    [
        ["{= s/a/b/ =}"],
        ["{=", "s/a/b/", "=}"],
        ["x{=1 $_.=2 =}y"],
        ["{==}"],
    ],
)
def test_a_perl_expression_is_refused_and_nothing_runs(tmp_path, words):
    ran = tmp_path / "ran"
    done = run_cli("batch", "--out", tmp_path / "out", "--", "touch", ran, *words, ":::", "a", cwd=tmp_path)
    assert done.returncode == USAGE, done.stderr
    assert SAID in done.stderr and done.stderr.count(b"\n") == 1, done.stderr
    assert not ran.exists() and not (tmp_path / "out").exists()


def test_a_perl_expression_in_the_id_is_refused():
    done = run_cli("batch", "--dry-run", "--id", "{= $_ =}", "--", "echo", ":::", "a")
    assert done.returncode == USAGE and b"--id: {= $_ =} " + SAID in done.stderr, done.stderr


def test_text_parallel_reads_as_no_expression_stays_text():
    done = run_cli("batch", "--dry-run", "--", "echo", "{=}", "{=", "{={=}", ":::", "a")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["args"] == ["echo", "{=}", "{=", "{={=}", "a"]


@pytest.mark.skipif(shutil.which("parallel") is None, reason="GNU parallel is not installed")
def test_gnu_parallel_runs_the_expression_as_code():
    """Why the batch refuses it: parallel's job gets the expression's value, not its text."""
    peer = subprocess.run(
        ["parallel", "--will-cite", "-k", "echo", "{=", "s/a/b/", "=}", "{=}", "{={=}", ":::", "a.c"],
        capture_output=True,
    )
    assert peer.returncode == 0 and peer.stdout == b"b.c {=} {={=}\n", peer


SLOTS = [("{%}{}", "{%}", b"1{%}\n"), ("{{}}{%}", "%", b"{%}1\n")]  # word, argument, parallel's output


@pytest.mark.parametrize("word, argument", [case[:2] for case in SLOTS])
def test_a_slot_text_beside_the_templates_is_refused(tmp_path, word, argument):
    ran = tmp_path / "ran"
    done = run_cli("batch", "--out", tmp_path / "out", "--", "touch", ran, word, ":::", argument, cwd=tmp_path)
    assert done.returncode == USAGE, done.stderr
    assert done.stderr == (
        b"processkit-cli: job 1: args item 2, once filled, holds {%} beyond the template's: the slot would "
        b"replace both; give {%} a word of its own\n"
    )
    assert not ran.exists()


def test_an_arguments_slot_text_elsewhere_reaches_the_child_as_it_is(tmp_path):
    done = run_cli("batch", "--out", tmp_path / "out", "--show-output", "--", "echo", "{%}", "x{}", "{}", ":::", "{%}")
    assert done.returncode == 0, done.stderr
    assert b"\n1 x{%} {%}\n" in done.stdout, done.stdout


@pytest.mark.skipif(shutil.which("parallel") is None, reason="GNU parallel is not installed")
@pytest.mark.parametrize("word, argument, printed", SLOTS)
def test_gnu_parallel_fills_only_the_templates_slot(word, argument, printed):
    peer = subprocess.run(["parallel", "--will-cite", "-j1", "echo", word, ":::", argument], capture_output=True)
    assert peer.returncode == 0 and peer.stdout == printed, peer


def test_a_manifest_line_carries_the_text_as_it_is(tmp_path):
    """The way docs/batch.md gives for a command whose own text holds ``{=`` and ``=}``."""
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text(json.dumps({"args": ["echo", "s/{=/x/;s/=}/y/"], "id": "sed"}) + "\n")
    done = run_cli("batch", "--out", tmp_path / "out", "--show-output", manifest, cwd=tmp_path)
    assert done.returncode == 0 and b"\ns/{=/x/;s/=}/y/\n" in done.stdout, done


def test_a_source_counted_from_the_last_is_parallels(tmp_path):
    """GNU parallel's ``{-N}`` is the N-th source from the last (its man page, ``{n}``); the batch
    left ``{-1}`` as text and, seeing no replacement string, put the arguments after it. One past
    the sources is refused as ``{N}`` past them is (parallel wraps round to another source)."""
    out = tmp_path / "out"
    done = run_cli(
        "batch", "--out", out, "--", "printf", "%s,", "{-1}", "x{-2.}y", "{-1/}", ":::", "a.b", ":::", "c/d.e"
    )
    assert done.returncode == 0, done.stderr
    assert (out / "a.b_c_d.e" / "capture" / "stdout.log").read_bytes() == b"c/d.e,xay,d.e,"
    done = run_cli("batch", "--out", out, "--", "touch", tmp_path / "ran", "{-3}", ":::", "a", ":::", "b")
    assert done.returncode == USAGE, done.stderr
    assert done.stderr == (
        b"processkit-cli: {-3} names input source 3 from the last, and there are only 2 input sources\n"
    )
    assert not (tmp_path / "ran").exists()
