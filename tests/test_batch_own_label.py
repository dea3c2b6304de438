"""Every job of a batch carries ``batch=<the batch's id>``: ``list --label`` finds its jobs by it,
and a ``--dask-scheduler`` client knows a lost task's streams for its own by it
(``batching/ended.py``). A user's ``--label batch=nightly`` (or a line's ``"labels": {"batch":
...}``) once replaced it silently on every job: ``list --label batch=<id>`` named none of them,
``wait --all --label batch=nightly`` waited for the jobs live then, not for the batch (whose own
record keeps its id), and the refusal of ``inspect <id>`` pointed at jobs no list would show. Now
it is refused before anything runs, on one line saying to give another key: a short one, read at
a glance (it was 248 characters, one check and wording for the flag, another for a line's key)."""

from __future__ import annotations

import json
import shlex

import pytest

from conftest import run_cli

SHORT = 140  # one line a user reads at a glance, its why and its way out kept


def _refused_in_one_short_line(proc, tmp_path, named: str, way_out: str) -> None:
    """Refused before any job (100), on one line of at most ``SHORT`` characters: what was given,
    the reason and the way out."""
    said = proc.stderr.decode()
    assert proc.returncode == 100, said
    assert said.count("\n") == 1 and said.startswith(f"processkit-cli: {named}"), said
    assert "batch=<batch id> is the batch's own label on every job" in said, said
    assert said.endswith(f"; use another key, e.g. {way_out}\n") and len(said) <= SHORT, said
    assert not (tmp_path / "out").exists()


def test_a_label_named_batch_on_the_command_line_is_refused_naming_the_flag(tmp_path):
    proc = run_cli("batch", "--out", "out", "--label", "batch=nightly", "--", "true", ":::", "a", cwd=tmp_path)
    _refused_in_one_short_line(proc, tmp_path, "--label batch=nightly: ", "group=nightly")


@pytest.mark.parametrize(
    ("given", "named"),
    [("batch", "--label batch: "), ("batch=", "--label batch=: "), ("batch=" + "v" * 300, "--label batch=vvv")],
    ids=["no-equals", "empty", "long"],
)
def test_a_long_value_is_shown_once_and_no_equals_named_as_typed(tmp_path, given, named):
    """A long value is cut once, not again in the way out (a 300-character one made a 284-character
    line); ``--label batch`` is named as typed, not as ``batch=``; neither suggests ``group=``
    with nothing after it."""
    proc = run_cli("batch", "--out", "out", "--label", given, "--", "true", ":::", "a", cwd=tmp_path)
    said = proc.stderr.decode()
    assert proc.returncode == 100, said
    assert said.count("\n") == 1 and said.startswith(f"processkit-cli: {named}"), said
    assert said.count("v" * 40) <= 1 and said.endswith("; use another key, e.g. group=...\n"), said
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("value", "suggested"),
    [("night ly's", """group='night ly'"'"'s'"""), ('say "hi"', """group='say "hi"'""")],
    ids=["space-and-single-quote", "double-quotes"],
)
def test_the_way_out_can_be_pasted_into_a_shell(tmp_path, value, suggested):
    """A value with a space or a quote was suggested as typed (``e.g. group=night ly's``), which a
    shell cannot take: it is shell-quoted now, and reads back as the value."""
    proc = run_cli("batch", "--out", "out", "--label", f"batch={value}", "--", "true", ":::", "a", cwd=tmp_path)
    said = proc.stderr.decode()
    assert proc.returncode == 100, said
    assert said.endswith(f"; use another key, e.g. {suggested}\n"), said
    assert shlex.split(suggested) == [f"group={value}"]
    assert not (tmp_path / "out").exists()


def test_a_value_with_a_control_character_is_not_offered_as_pasteable(tmp_path):
    """A newline in the value is shown escaped (``a\\nb``) on the one line, which a shell would
    read back as a backslash and an ``n``: the way out says ``group=...`` rather than a value that
    is not the one given."""
    proc = run_cli("batch", "--out", "out", "--label", "batch=a\nb", "--", "true", ":::", "a", cwd=tmp_path)
    said = proc.stderr.decode()
    assert proc.returncode == 100, said
    assert said.endswith("; use another key, e.g. group=...\n"), said


def test_a_manifest_lines_batch_label_is_refused_naming_its_line(tmp_path):
    lines = [{"args": ["true"], "id": "a", "labels": {"team": "x"}}, {"args": ["true"], "labels": {"batch": "n"}}]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    proc = run_cli("batch", "m.jsonl", "--out", "out", cwd=tmp_path)
    _refused_in_one_short_line(proc, tmp_path, "manifest line 2: labels key batch: ", '"group"')


def test_another_label_is_the_jobs_beside_the_batchs_own(tmp_path):
    proc = run_cli("batch", "--out", "out", "--label", "team=x", "--", "true", ":::", "a", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    started = json.loads((tmp_path / "out" / "a" / "events.jsonl").read_text().splitlines()[0])
    assert started["labels"]["team"] == "x" and started["labels"]["batch"].startswith("batch-"), started


def test_the_api_refuses_it_in_the_same_words(tmp_path):
    """``processkit.batch``'s job goes through the same check as a manifest line's."""
    import processkit

    with pytest.raises(ValueError) as raised:
        processkit.batch([{"args": ["true"], "labels": {"batch": "n"}}], out=str(tmp_path / "out"))
    assert str(raised.value).startswith("jobs[0]: labels key batch: batch=<batch id> is the batch's own"), raised.value
    assert not (tmp_path / "out").exists()
