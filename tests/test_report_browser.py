"""Report pages in a real headless Chromium (the distribution's, driven by chromedriver):
what a person sees, not what the HTML source says.

One browser for the module; the streams come from real ``processkit-cli run``s (a tree that
outlives its root, a timeout, a child printing colours) and from a hand-made hostile stream.
"""

from __future__ import annotations

import re
import shutil
import sys

import pytest

import headless_chromium
from conftest import SAFETY_NET, read_events, run_cli
from report_streams import HOSTILE_ID, HOSTILE_LABEL, hostile_stream
from test_batch import sleeping_batch, start_batch, write_manifest  # noqa: F401 (start_batch: a fixture)

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
COLOUR_CHILD = "import sys; sys.stdout.write('plain \\x1b[31mRED\\x1b[0m \\x1b[1;32mGREEN\\x1b[0m\\nlast line\\n')"


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("chromium and chromium-driver are not installed (.ci/run installs them)")
    pytest.importorskip("selenium.webdriver")
    profile = str(tmp_path_factory.mktemp("chromium-profile"))
    driver = headless_chromium.start(CHROMIUM, CHROMEDRIVER, profile, {"goog:loggingPrefs": {"browser": "ALL"}})
    yield driver
    driver.quit()


def open_page(browser, path):
    browser.get(path.as_uri())
    return browser


def console_errors(browser) -> list:
    return [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def text_of(browser, selector: str) -> str:
    return browser.find_element("css selector", selector).text


def rendered(tmp_path, *streams, capture_dir=None):
    out = tmp_path / "page.html"
    extra = ["--capture-dir", capture_dir] if capture_dir else []
    result = run_cli("report", *streams, *extra, "-o", out)
    assert result.returncode == 0, result.stderr
    return out


def test_a_tree_that_outlives_its_root(browser, tmp_path):
    stream = tmp_path / "tree.jsonl"
    ran = run_cli(
        "run",
        "--jsonl",
        stream,
        "--run-id",
        "tree-run",
        "--label",
        "suite=report",
        "--snapshot-interval",
        "50ms",
        "--",
        "sh",
        "-c",
        # the root waits for the short sleep, so only the long one outlives it (two sleeps
        # timed against each other could both outlive it on a loaded host)
        "sleep 30 >/dev/null 2>&1 & sleep 0.4 & wait $!",
    )
    assert ran.returncode == 0
    events = read_events(stream)
    seen = {(m["pid"], m["start_time"]) for e in events if e["event"] == "members_snapshot" for m in e["members"]}
    page = open_page(browser, rendered(tmp_path, stream))
    assert text_of(page, "h1") == "Run tree-run"
    assert (
        text_of(page, "dd.run-id") == "tree-run"
        and "suite=report" in page.find_element("css selector", "dl.facts").text
    )
    assert len(page.find_elements("css selector", "svg.tree rect.bar")) == len(seen) >= 3
    assert page.find_elements("css selector", "svg.tree rect.bar.outlived"), "the orphaned sleep is marked"
    assert text_of(page, "p.ending").startswith("The child exited with code 0; 1 process outlived it")
    assert len(page.find_elements("css selector", "svg.timeline circle.mark")) == len(events)
    assert console_errors(page) == []


def test_a_timeout_says_how_it_ended(browser, tmp_path):
    stream = tmp_path / "timeout.jsonl"
    assert (
        run_cli("run", "--jsonl", stream, "--timeout", "300ms", "--grace", "5s", "--", "sleep", "30").returncode == 106
    )
    page = open_page(browser, rendered(tmp_path, stream))
    assert re.fullmatch(
        r"Timed out after 300ms; the tree was stopped gracefully in \d+(ms|(\.\d+)?s); the runner exited 106\.",
        text_of(page, "p.ending"),
    )
    assert text_of(page, "dd.exit") == "106 (timeout)"
    assert console_errors(page) == []


def test_capture_tails_show_terminal_colours_as_colour(browser, tmp_path):
    stream, capture = tmp_path / "colour.jsonl", tmp_path / "capture"
    assert (
        run_cli("run", "--jsonl", stream, "--capture-dir", capture, "--", sys.executable, "-c", COLOUR_CHILD).returncode
        == 0
    )
    moved = tmp_path / "moved"
    shutil.move(capture, moved)  # found through --capture-dir, not the recorded path
    page = open_page(browser, rendered(tmp_path, stream, capture_dir=moved))
    tail = page.find_element("css selector", "pre.tail[data-stream=stdout]")
    assert tail.text == "plain RED GREEN\nlast line"
    red = tail.find_element("xpath", ".//span[text()='RED']")
    assert red.value_of_css_property("color") == "rgba(205, 0, 0, 1)"
    green = tail.find_element("xpath", ".//span[text()='GREEN']")
    assert green.value_of_css_property("font-weight") == "700"
    assert console_errors(page) == []


def test_hostile_values_are_shown_as_text(browser, tmp_path):
    hostile_stream(tmp_path / "hostile.jsonl")
    page = open_page(browser, rendered(tmp_path, tmp_path / "hostile.jsonl"))
    assert text_of(page, "dd.run-id") == HOSTILE_ID
    assert HOSTILE_LABEL in text_of(page, "dl.facts")
    assert "\\x1b[2J" in text_of(page, "dd.command")
    assert page.find_elements("css selector", "script, img, b, i") == []
    assert page.execute_script("return document.title") == f"Run {HOSTILE_ID}"
    assert console_errors(page) == []


def test_the_index_sorts_and_links(browser, tmp_path):
    streams = tmp_path / "streams"
    streams.mkdir()
    for name, script in (("quick", "exit 0"), ("broken", "exit 4"), ("slow", "sleep 0.5"), ("middle", "sleep 0.2")):
        run_cli("run", "--jsonl", streams / f"{name}.jsonl", "--run-id", name, "--", "sh", "-c", script)
    page = open_page(browser, rendered(tmp_path, streams))

    def rows():
        return [
            row.find_element("css selector", "td").text
            for row in page.find_elements("css selector", "table.runs tbody tr")
        ]

    assert rows()[0] == "broken" and len(rows()) == 4
    assert len(page.find_elements("css selector", "svg.histogram rect.bar")) >= 2
    header = page.find_element("xpath", "//table[@class='runs']//th[text()='duration']")
    header.click()
    assert rows()[-2:] == ["middle", "slow"] and header.get_attribute("aria-sort") == "ascending"
    header.click()
    assert rows()[:2] == ["slow", "middle"] and header.get_attribute("aria-sort") == "descending"
    page.find_element("link text", "slow").click()
    assert page.current_url.endswith("#" + page.find_element("css selector", "section.run:target").get_attribute("id"))
    assert "slow" in text_of(page, "section.run:target h2")
    assert console_errors(page) == []


def test_a_batch_page_names_the_failing_job_first(browser, tmp_path):
    """One broken file among several: the page a person opens says which, with its error, and
    draws every job on the timeline."""
    import json

    jobs = [{"args": ["true"], "id": f"unit{n}"} for n in range(5)]
    jobs.insert(2, {"args": ["sh", "-c", "echo 'broken.c:7: error: expected ;' >&2; exit 1"], "id": "broken"})
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    out = tmp_path / "out"
    assert run_cli("batch", manifest, "--out", out, "--jobs", "2").returncode == 117
    page = open_page(browser, out / "index.html")
    assert console_errors(page) == []
    headings = [element.text for element in page.find_elements("css selector", "h2")]
    assert headings[0] == "Failures"
    failure = text_of(page, "section.failure")
    assert "broken" in failure and "exit 1" in failure and "broken.c:7: error: expected ;" in failure
    first_row = page.find_elements("css selector", "table.jobs tbody tr")[0]
    assert first_row.text.startswith("broken")
    bars = page.find_elements("css selector", "svg.timeline rect.job")
    assert len(bars) == 6 and len(page.find_elements("css selector", "svg.timeline rect.st-failed")) == 1
    assert all(bar.size["width"] > 0 for bar in bars)


def test_a_batch_page_shows_the_tail_of_every_stream_that_holds_something(browser, tmp_path):
    """A pytest shard fails on stdout: its FAILED line is in a box labelled stdout, not "the
    capture file is empty" under stderr; a job that wrote on both streams shows both, labelled."""
    shard = "print('tests/test_x.py F'); print('FAILED tests/test_x.py::test_y - assert 1 == 2'); raise SystemExit(1)"
    jobs = [
        {"args": [sys.executable, "-c", shard], "id": "shard"},
        {"args": ["sh", "-c", "echo 'to stdout'; echo 'to stderr' >&2; exit 2"], "id": "both"},
    ]
    out = tmp_path / "out"
    assert run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", out).returncode == 117
    page = open_page(browser, out / "index.html")
    assert console_errors(page) == []
    shown = page.find_element("css selector", "#failure-shard")
    assert [box.get_attribute("data-stream") for box in shown.find_elements("css selector", "pre.tail")] == ["stdout"]
    assert shown.find_element("css selector", "pre.tail").text.endswith(
        "FAILED tests/test_x.py::test_y - assert 1 == 2"
    )
    assert "stdout.log" in shown.text and "empty" not in shown.text
    both = page.find_element("css selector", "#failure-both")
    boxes = {box.get_attribute("data-stream"): box.text for box in both.find_elements("css selector", "pre.tail")}
    assert boxes == {"stdout": "to stdout", "stderr": "to stderr"}


def test_a_cancelled_batch_page_calls_its_jobs_cancelled_not_failures(browser, tmp_path, start_batch):
    import signal

    batch, out = sleeping_batch(start_batch, tmp_path, 3)
    batch.send_signal(signal.SIGINT)
    batch.communicate(timeout=SAFETY_NET)
    assert batch.returncode == -signal.SIGINT
    page = open_page(browser, out / "index.html")
    assert console_errors(page) == []
    headings = [element.text for element in page.find_elements("css selector", "h2")]
    assert "Failures" not in headings and headings[0] == "Cancelled", headings
    assert text_of(page, "p.ending") == "0 exited 0, 2 cancelled, 1 never started."
    assert "failed" not in page.title
    assert {element.text for element in page.find_elements("css selector", "td.st-cancelled")} == {
        "cancelled (exit 107)"
    }


def summary_line(job_id, started_at, duration_ms, exit_code, source):
    return {
        "id": job_id,
        "run_id": None,
        "command": ["true"],
        "started_at": started_at,
        "exit_code": exit_code,
        "source": source,
        "duration_ms": duration_ms,
        "attempts": 1 if exit_code is not None else 0,
        "resources": {"total_cpu_ms": 1012 if exit_code is not None else None},
        "capture": {"stdout": None, "stderr": None},
        "message": None,
        "earlier_attempts": [],
    }


def test_a_batch_page_names_a_lost_dask_task_and_says_durations_one_way(browser, tmp_path):
    """A summary (as a Dask batch writes it) with a job whose task failed: the page calls it
    so, not "never started"; and every duration on the page is one format, 985.7 ms beside 1.012 s."""
    out = tmp_path / "out"
    out.mkdir()
    lines = [
        summary_line("quick", "2026-01-01T00:00:00.000000Z", 985.7, 0, "child_exit"),
        summary_line("slower", "2026-01-01T00:00:00.000000Z", 1012.0, 0, "child_exit"),
        summary_line("lost", None, None, None, "task_failed"),
    ]
    write_manifest(out / "summary.jsonl", lines)
    page = open_page(browser, rendered(tmp_path, out))
    assert console_errors(page) == []
    rows = {
        row.find_elements("css selector", "td")[0].text: [cell.text for cell in row.find_elements("css selector", "td")]
        for row in page.find_elements("css selector", "table.jobs tbody tr")
    }
    assert rows["lost"][1] == "task failed"
    headings = [element.text for element in page.find_elements("css selector", "h2")]
    assert "Never started" not in headings
    assert "lost" in text_of(page, "#failure-lost")
    assert (rows["quick"][3], rows["slower"][3], rows["slower"][6]) == ("985.7 ms", "1.012 s", "1.012 s")
    totals = page.find_element("css selector", "dl.totals").text
    assert "1.012 s" in totals  # the wall time and the CPU
    one_format = re.compile(r"(—|\d+(\.\d+)? (ms|s)|(\d+ h )?(\d+ min )?\d+ s|0)")
    ticks = [
        label.text for label in page.find_elements("css selector", "svg.timeline text") if "slot" not in label.text
    ]
    for shown in [rows[job][3] for job in ("quick", "slower")] + ticks:
        assert one_format.fullmatch(shown), shown


def test_a_tail_capture_opens_at_its_end(browser, tmp_path):
    """A --capture-keep tail run whose traceback comes last: its output box opens on the
    traceback, not on the first lines it kept."""
    stream, capture = tmp_path / "tail.jsonl", tmp_path / "capture"
    child = (
        "import sys\nfor n in range(2000): print(f'progress {n}', file=sys.stderr)\nraise ValueError('the last line')"
    )
    ran = run_cli(
        "run", "--jsonl", stream, "--capture-dir", capture, "--capture-keep", "tail", "--capture-max-bytes", "8K",
        "--", sys.executable, "-c", child,
    )  # fmt: skip
    assert ran.returncode == 1, ran.stderr
    page = open_page(browser, rendered(tmp_path, stream))
    tail = page.find_element("css selector", "pre.tail[data-stream=stderr]")
    assert tail.text.endswith("ValueError: the last line")
    box, first, last = page.execute_script(
        "const tail = arguments[0]; let box = tail;"
        "while (getComputedStyle(box).overflowY !== 'auto') box = box.parentElement;"
        "const range = document.createRange(); range.selectNodeContents(tail);"
        "const lines = range.getClientRects(), seen = box.getBoundingClientRect();"
        "return [[seen.top, seen.bottom], lines[0].top, lines[lines.length - 1].bottom];",
        tail,
    )
    assert first < box[0], "the box holds more lines than it shows"
    assert box[0] < last <= box[1] + 1, f"the last line is in view: box {box}, last line's bottom {last}"
    assert console_errors(page) == []
