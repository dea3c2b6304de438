"""``report`` at the process level: real runs and hand-made streams in, HTML files out.
What a page looks like in a browser is tests/test_report_browser.py's job."""

from __future__ import annotations

import html
import json
import os
import re

from conftest import SAFETY_NET, run_cli, start_cli, wait_for_event
from report_streams import HOSTILE_ID, HOSTILE_LABEL, event, hostile_stream, started, write_stream


def report(*args):
    result = run_cli("report", *args)
    return result, result.stderr.decode()


def page_text(path) -> str:
    return path.read_text(encoding="utf-8")


def test_a_real_run_becomes_a_page(tmp_path):
    stream = tmp_path / "run.jsonl"
    ran = run_cli(
        "run",
        "--jsonl",
        stream,
        "--run-id",
        "build-7",
        "--label",
        "step=link",
        "--capture-dir",
        tmp_path / "cap",
        "--",
        "sh",
        "-c",
        "echo hello; exit 3",
    )
    assert ran.returncode == 3
    result, err = report(stream, "-o", tmp_path / "out.html")
    assert result.returncode == 0, err
    assert result.stdout.decode() == f"wrote {tmp_path / 'out.html'}: run 'build-7'\n"
    page = page_text(tmp_path / "out.html")
    assert "build-7" in page and "step=link" in page
    assert "The child exited with code 3; the runner exited 3." in page
    assert "hello" in page  # the capture's last lines, found through output_captured's path
    assert "redacted (argv sha256" in page  # the argv was not recorded, so it is not shown
    assert not re.search(r"<(link|img|iframe)\b|src=|https?://", page), "a page fetches nothing"


def test_the_argv_is_shown_only_when_it_was_recorded(tmp_path):
    stream = tmp_path / "run.jsonl"
    run_cli("run", "--jsonl", stream, "--argv-raw", "--", "echo", "secret-free", "--flag")
    result, err = report(stream, "-o", tmp_path / "out.html")
    assert result.returncode == 0, err
    assert "echo secret-free --flag" in page_text(tmp_path / "out.html")


def test_hostile_fields_are_shown_as_text(tmp_path):
    hostile_stream(tmp_path / "hostile.jsonl")
    for args in ([tmp_path / "hostile.jsonl"], [tmp_path / "hostile.jsonl", tmp_path / "hostile.jsonl"]):
        result, err = report(*args, "-o", tmp_path / "out.html")
        assert result.returncode == 0, err
        page = page_text(tmp_path / "out.html")
        assert "\x1b" not in page and "\x07" not in page
        assert "<script>alert" not in page and "<img" not in page and "<svg onload" not in page and "<b>" not in page
        assert html.escape(HOSTILE_ID, quote=False) in page.replace("&#34;", '"')
        assert html.escape(HOSTILE_LABEL) in page
        assert "\\x1b[2J" in page  # the argv's terminal escape is written out, as text


def test_a_file_that_is_not_an_event_stream_is_114_in_one_line(tmp_path):
    cases = {
        "text.jsonl": b"hello\nworld\n",
        "empty.jsonl": b"",
        "json.jsonl": b'{"a": 1}\n[1,2]\n',
        "binary.jsonl": b"\x00\xff\xfe" * 50,
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        result, err = report(tmp_path / name, "-o", tmp_path / "out.html")
        assert result.returncode == 114, (name, err)
        assert err.count("\n") == 1 and "is not a processkit event stream" in err, err
        assert not (tmp_path / "out.html").exists()
    result, _ = report(tmp_path / "json.jsonl", tmp_path / "text.jsonl", "-o", tmp_path / "out.html")
    assert result.returncode == 114 and not (tmp_path / "out.html").exists()
    enveloped = run_cli("--error-format", "json", "report", tmp_path / "text.jsonl", "-o", tmp_path / "out.html")
    assert json.loads(enveloped.stderr)["kind"] == "events_invalid" and enveloped.returncode == 114


def test_unreadable_inputs_and_usage_errors(tmp_path):
    result, err = report(tmp_path / "absent.jsonl", "-o", tmp_path / "out.html")
    assert result.returncode == 111 and "cannot read the events stream" in err and err.count("\n") == 1
    hostile_stream(tmp_path / "a.jsonl")
    assert report(tmp_path / "a.jsonl")[0].returncode == 100  # -o is required
    both, err = report(tmp_path / "a.jsonl", tmp_path / "a.jsonl", "--capture-dir", tmp_path, "-o", tmp_path / "o.html")
    assert both.returncode == 100 and "single stream" in err
    (tmp_path / "empty").mkdir()
    assert report(tmp_path / "empty", "-o", tmp_path / "o.html")[0].returncode == 114
    result, err = report(tmp_path / "a.jsonl", "-o", tmp_path / "no-such-dir" / "o.html")
    assert result.returncode == 111 and "cannot write" in err


def test_damaged_streams_still_give_a_page_that_says_what_is_missing(tmp_path):
    stream = tmp_path / "cut.jsonl"
    write_stream(
        stream,
        [
            started(),
            event("members_snapshot", reason="spawn", read_error=False, members=[]),
            {"schema_version": 1, "event": "root_exited", "outcome": 7},
        ],
        tail=b'not json at all\n{"schema_version":1,"time":"2026-01-01T00:00:02.000Z","event":"resource_su',
    )
    result, err = report(stream, "-o", tmp_path / "out.html")
    assert result.returncode == 0, err
    page = page_text(tmp_path / "out.html")
    assert "What this report cannot show" in page
    assert "the stream ends without runner_exit and no runner registered here writes it: the runner was killed" in page
    assert "line 3: a root_exited event that does not match the schema" in page
    assert "line 4: not valid JSON" in page and "line 5: not valid JSON" in page
    assert "No ending was recorded; the runner&#39;s exit was not recorded." in page


def test_a_stream_still_being_written_is_said_to_be(tmp_path):
    stream = tmp_path / "live.jsonl"
    runner = start_cli("run", "--jsonl", stream, "--snapshot-interval", "50ms", "--", "sleep", "3600")
    try:
        wait_for_event(stream, "members_snapshot")
        result, err = report(stream, "-o", tmp_path / "out.html")
        assert result.returncode == 0, err
        assert "a registered runner is still writing it" in page_text(tmp_path / "out.html")
    finally:
        runner.terminate()
        runner.communicate(timeout=SAFETY_NET)
    result, err = report(stream, "-o", tmp_path / "out.html")
    assert "still writing" not in page_text(tmp_path / "out.html") and "Cancelled by SIGTERM" in page_text(
        tmp_path / "out.html"
    )


def _live_ring_page(tmp_path, env=None, copied: bool = False) -> str:
    """The page of a live ``--capture-keep tail`` run, drawn with ``--capture-dir`` while it goes
    on (``copied``: from a copy of its stream taken then, which no runner writes)."""
    stream, capture = tmp_path / "live.jsonl", tmp_path / "capture"
    runner = start_cli(
        "run", "--jsonl", stream, "--capture-dir", capture, "--capture-keep", "tail", "--no-echo",
        "--snapshot-interval", "50ms", "--", "sh", "-c", "echo hello; exec sleep 3600", env=env,
    )  # fmt: skip
    try:
        wait_for_event(stream, "members_snapshot")
        if copied:
            stream = tmp_path / "copy.jsonl"
            stream.write_bytes((tmp_path / "live.jsonl").read_bytes())
        result, err = report(stream, "--capture-dir", capture, "-o", tmp_path / "out.html")
        assert result.returncode == 0, err
        return page_text(tmp_path / "out.html")
    finally:
        runner.terminate()
        runner.communicate(timeout=SAFETY_NET)


def test_a_live_ring_runs_capture_is_not_said_killed(tmp_path):
    """``--capture-dir`` on a live ring run read its record as a killed runner's: "SHA-256 none:
    the runner was killed before the end" while the registered runner went on writing."""
    page = _live_ring_page(tmp_path)
    assert "a registered runner is still writing it" in page
    assert "killed" not in page
    assert "none yet: the run is still going" in page
    assert "the run is still going; these bytes were put in stream order" in page


def test_a_live_run_no_registry_here_holds_is_not_said_killed(tmp_path):
    """A live run this user's registry does not hold (one that could not register, as here with a
    shared registry directory; another user's run read by root) was said killed: "the runner was
    killed, or the file was cut short or copied mid-run", while it went on writing its stream."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o1777)
    shared.chmod(0o1777)  # sticky and shared: never used, the run warns and goes on unregistered
    stream = tmp_path / "live.jsonl"
    env = dict(os.environ, PROCESSKIT_CLI_REGISTRY_DIR=str(shared))
    runner = start_cli("run", "--jsonl", stream, "--snapshot-interval", "50ms", "--", "sleep", "3600", env=env)
    try:
        wait_for_event(stream, "members_snapshot")
        result, err = report(stream, "-o", tmp_path / "out.html")
        assert result.returncode == 0, err
        page = page_text(tmp_path / "out.html")
        assert "no runner registered here writes it" in page
        assert (
            "or its run is not in this user&#39;s registry (another user&#39;s run, or one that could not register)"
            in page
        )
    finally:
        runner.terminate()
        runner.communicate(timeout=SAFETY_NET)


def test_a_live_ring_run_no_registry_here_holds_has_its_capture_not_said_killed(tmp_path):
    """``--capture-dir`` on a ring run this user's registry does not hold (it could not register)
    said its capture "SHA-256 none: the runner was killed before the end" and "the runner was
    killed before the stream ended" while the run went on, beside a missing section that hedges."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o1777)
    shared.chmod(0o1777)  # sticky and shared: never used, the run warns and goes on unregistered
    page = _live_ring_page(tmp_path, dict(os.environ, PROCESSKIT_CLI_REGISTRY_DIR=str(shared)))
    assert "no runner registered here writes it" in page
    assert "killed before" not in page
    assert "none: the runner was killed, the stream file was cut short or copied mid-run, or its run is not" in page
    assert "no runner registered here writes it: the runner was killed, the stream file was cut short or" in page


def test_a_ring_runs_stream_copied_mid_run_has_its_capture_said_as_its_missing_end(tmp_path):
    """A copy of a live, registered ring run's stream, read with ``--capture-dir``, said its
    capture "SHA-256 none: the runner was killed, or its run is not in this user's registry":
    neither was so, and the missing section beside it named the copy. The capture now names the
    causes the missing section names, in its words: "the stream file", which beside a capture
    "the file" is not, and the note's clause after them, not brackets around their own."""
    page = _live_ring_page(tmp_path, copied=True)
    why = (
        "the runner was killed, the stream file was cut short or copied mid-run, or its run is not in this "
        "user&#39;s registry (another user&#39;s run, or one that could not register) and may still be going on"
    )
    assert f"the stream ends without runner_exit and no runner registered here writes it: {why}" in page
    assert f"none: {why}" in page
    assert f"no runner registered here writes it: {why}; these bytes were put in stream order" in page
    assert "the file was cut short" not in page and "writes it (the runner" not in page


def test_a_directory_of_streams_is_an_index_with_failures_first(tmp_path):
    streams = tmp_path / "streams"
    streams.mkdir()
    for name, code in (("a-ok", 0), ("b-fail", 5), ("c-ok", 0)):
        run_cli("run", "--jsonl", streams / f"{name}.jsonl", "--run-id", name, "--", "sh", "-c", f"exit {code}")
    (streams / "notes.txt").write_text("not a stream, not a .jsonl")
    result, err = report(streams, "-o", tmp_path / "index.html")
    assert result.returncode == 0, err
    assert result.stdout.decode().endswith(": 3 runs\n")
    page = page_text(tmp_path / "index.html")
    rows = re.findall(r'<tr(?: class="failed")?><td><a href="#(run-\d+)">([^<]*)</a>', page)
    assert [name for _, name in rows] == ["b-fail", "a-ok", "c-ok"]
    assert all(f'id="{anchor}"' in page for anchor, _ in rows)
    assert page.count("<section") == 3


def test_ones_own_link_to_a_directory_given_with_a_slash_is_drawn(tmp_path):
    """``ln -s streams/ LINK; report LINK`` (a target ending in ``/``, as tab completion writes
    it) exited 111 "LINK names a directory"; the starting tree drew the page. A link to a file
    with a ``/`` after it is no directory."""
    streams = tmp_path / "streams"
    streams.mkdir()
    run_cli("run", "--jsonl", streams / "a.jsonl", "--run-id", "slash-run", "--", "true")
    for target in (f"{streams}/", "streams/", "streams//"):
        link = tmp_path / "slashlink"
        link.unlink(missing_ok=True)
        link.symlink_to(target)
        result, err = report(link, "-o", tmp_path / "index.html")
        assert result.returncode == 0, (target, err)
        assert "slash-run" in page_text(tmp_path / "index.html")
    link.unlink()
    link.symlink_to(f"{streams}/a.jsonl/")
    result, err = report(link, "-o", tmp_path / "file.html")
    assert result.returncode != 0 and "Not a directory" in err, err


def test_capture_files_are_checked_and_only_real_captures_are_read(tmp_path):
    stream, capture = tmp_path / "run.jsonl", tmp_path / "cap"
    run_cli("run", "--jsonl", stream, "--capture-dir", capture, "--", "sh", "-c", "echo first; echo second >&2")
    (capture / "stderr.log").write_text("edited after the run\n")
    result, err = report(stream, "-o", tmp_path / "out.html")
    assert result.returncode == 0, err
    page = page_text(tmp_path / "out.html")
    assert "the file&#39;s SHA-256 matches the one the run recorded" in page and "first" in page
    assert "differs from the one the run recorded" in page and "edited after the run" in page

    # A hostile stream naming a FIFO (which would block a plain open) and an arbitrary file.
    os.mkfifo(tmp_path / "stdout.log")
    (tmp_path / "secret.txt").write_text("do not show me\n")
    events = [json.loads(line) for line in stream.read_text().splitlines()]
    for e in events:
        if e["event"] == "output_captured":
            e["stdout"]["path"] = str(tmp_path / "stdout.log")
            e["stderr"]["path"] = str(tmp_path / "secret.txt")
    write_stream(tmp_path / "hostile.jsonl", events)
    result, err = report(tmp_path / "hostile.jsonl", "-o", tmp_path / "out.html")
    assert result.returncode == 0, err
    page = page_text(tmp_path / "out.html")
    assert "the capture path is not a regular file" in page
    assert "does not name a capture file" in page and "do not show me" not in page


def test_terminal_text_becomes_safe_coloured_html():
    from processkit.report.tail import to_html

    page = str(to_html("\x1b[31mred <b>&</b>\x1b[0m\r\n50%\r100%\x1b[K\n\x1b]0;title\x07\ttab"))
    assert page.startswith('<span style="color: #cd0000">red &lt;b&gt;&amp;&lt;/b&gt;</span>\n')
    assert "\n100%\n" in page  # a carriage return keeps what the terminal finally shows
    assert page.endswith("\ttab")  # other escape sequences left out (a title); tabs kept
    assert str(to_html("a\x07b\x1bc")) == "a\\x07b\\x1bc"  # other controls written out
    assert "\x1b" not in page and "\r" not in page


def test_runs_that_never_started_say_why(tmp_path):
    stream = tmp_path / "spawn.jsonl"
    assert run_cli("run", "--jsonl", stream, "--", tmp_path / "no-such-program").returncode == 101
    result, err = report(stream, "-o", tmp_path / "out.html")
    assert result.returncode == 0, err
    page = page_text(tmp_path / "out.html")
    assert re.search(r"The program could not be started: [^<]+; the runner exited 101\.", page)
    assert "No members snapshot could be read" in page and "no valid run_started" not in page

    write_stream(stream, [event("runner_exit", code=111, source="setup", child_code=None)])
    result, err = report(stream, "-o", tmp_path / "out.html")
    assert result.returncode == 0, err
    assert "The run failed during setup, before anything was started; the runner exited 111." in page_text(
        tmp_path / "out.html"
    )


# -- who outlived the root (issue 23, item 11) -------------------------------------------------
MARK = "⚑ outlived the root"


def marked_pids(path) -> list[int]:
    return sorted(int(pid) for pid in re.findall(rf"\((\d+)\) {MARK}", page_text(path)))


def test_only_the_process_that_outlived_the_root_is_marked(tmp_path):
    """The last interval sample before the exit held both sleeps; only one outlived the root."""
    stream = tmp_path / "run.jsonl"
    ran = run_cli(
        "run",
        "--jsonl",
        stream,
        "--snapshot-interval",
        "100ms",
        "--",
        "sh",
        "-c",
        "sleep 30 >/dev/null 2>&1 & sleep 0.5; exit 0",
    )
    assert ran.returncode == 0
    events = [json.loads(line) for line in stream.read_text().splitlines()]
    snapshots = [e for e in events if e["event"] == "members_snapshot"]
    assert any(len(s["members"]) == 3 for s in snapshots), "a sample held the root and both sleeps"
    survivor = next(m["pid"] for m in snapshots[-1]["members"])
    assert report(stream, "-o", tmp_path / "out.html")[0].returncode == 0
    assert marked_pids(tmp_path / "out.html") == [survivor]
    assert "1 process outlived it" in page_text(tmp_path / "out.html")

    # Without the sample taken at the exit (a stream of an older runner) the stream cannot say
    # which of the two it was: none is marked, and the sentence keeps the count. An interval
    # sample can land between the short sleep's exit and the root's (a loaded machine): such a
    # sample goes too, so the last one left holds both sleeps, as an older runner's would.
    older = tmp_path / "older.jsonl"
    sampled = [index for index, e in enumerate(events) if e["event"] == "members_snapshot"]
    last_full = max(index for index in sampled if len(events[index]["members"]) == 3)
    dropped = {index for index in sampled if index > last_full}
    older.write_text("".join(json.dumps(e) + "\n" for index, e in enumerate(events) if index not in dropped))
    assert report(older, "-o", tmp_path / "older.html")[0].returncode == 0
    assert marked_pids(tmp_path / "older.html") == []
    assert "1 process outlived it" in page_text(tmp_path / "older.html")


def test_a_bench_export_whose_command_is_not_utf8_gets_its_page(tmp_path):
    # a command naming a legacy tree's Latin-1 file: the export spells the byte \udce9, and
    # report ended with an internal error (104) writing the page; it shows U+FFFD there
    export, page = tmp_path / "bench.json", tmp_path / "bench.html"
    command = os.fsdecode(b"true name-\xe9.py")
    done = run_cli("bench", "--runs", "1", "--style", "basic", "--export-json", export, command)
    assert done.returncode == 0, done.stderr
    drawn = run_cli("report", export, "-o", page)
    assert drawn.returncode == 0, drawn.stderr
    assert "true name-\ufffd.py" in page.read_text(encoding="utf-8")
