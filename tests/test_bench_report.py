"""``report BENCH.json``: the benchmark's page in a real headless Chromium."""

from __future__ import annotations

import json
import math
import re

import pytest

from conftest import run_cli
from test_report_browser import browser, console_errors, open_page, text_of  # noqa: F401 - the fixture

pytestmark = pytest.mark.usefixtures("browser")
FIGURE = r"\d+\.\d ± \d+\.\d (ms|µs)|\d+\.\d{3} ± \d+\.\d{3} s"  # hyperfine's precision, the unit once


def test_the_bench_page_shows_distribution_order_memory_and_comparison(browser, tmp_path):  # noqa: F811
    exported, page = tmp_path / "bench.json", tmp_path / "bench.html"
    done = run_cli(
        "bench", "--runs", "4", "--warmup", "1", "--command", '["true"]', "sleep 0.02", "--command-name", "quick",
        "--export-json", exported,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    made = run_cli("report", exported, "-o", page)
    assert made.returncode == 0, made.stderr
    open_page(browser, page)
    assert console_errors(browser) == []
    rows = browser.find_elements("css selector", "#summary tbody tr")
    assert [row.find_element("css selector", "td").text for row in rows] == ["quick", "sleep 0.02"]
    headers = [th.text for th in browser.find_elements("css selector", "#summary thead th")]
    cpu_column = headers.index("Tree CPU (user+system) ± σ")
    assert all(re.fullmatch(FIGURE, row.find_elements("css selector", "td")[cpu_column].text) for row in rows)
    assert len(browser.find_elements("css selector", "#distribution circle.run")) == 8
    assert len(browser.find_elements("css selector", "#distribution rect.box")) == 2
    sequence = browser.find_elements("css selector", "#sequence circle.seq")
    assert len(sequence) == 8
    xs = [float(c.get_attribute("cx")) for c in browser.find_elements("css selector", "#sequence circle.seq.series-0")]
    ys = [float(c.get_attribute("cx")) for c in browser.find_elements("css selector", "#sequence circle.seq.series-1")]
    assert all(a < b for a, b in zip(xs, ys))  # interleaved: each quick run just before a sleep run
    warmups = browser.find_elements("css selector", "#sequence circle.warmup")
    assert len(warmups) == 2
    assert max(float(c.get_attribute("cx")) for c in warmups) < min(xs + ys)  # warm-up drawn first
    assert len(browser.find_elements("css selector", "#memory rect.bar")) == 2
    assert "times faster than sleep 0.02" in text_of(browser, "#comparison")
    assert "quick" in text_of(browser, "#fastest")
    data = json.loads(exported.read_text())
    assert data["results"][0]["order"] == [0, 2, 4, 6] and len(data["results"][0]["warmup_times"]) == 1
    assert text_of(browser, "#about").endswith(f"; timed {data['processkit']['timed_interval']}.")  # as the file says


def test_a_hyperfine_export_gets_the_same_page(browser, tmp_path):  # noqa: F811
    """hyperfine's own --export-json (its keys only) is read too."""
    exported, page = tmp_path / "hyperfine.json", tmp_path / "hyperfine.html"
    keys = ("mean", "stddev", "median", "user", "system", "min", "max")
    results = [
        {"command": name, **dict.fromkeys(keys, times[0]), "times": times, "exit_codes": [0] * len(times)}
        for name, times in (("a", [0.010, 0.012, 0.011]), ("b", [0.020, 0.021, 0.022]))
    ]
    exported.write_text(json.dumps({"results": results}))
    made = run_cli("report", exported, "-o", page)
    assert made.returncode == 0, made.stderr
    open_page(browser, page)
    assert console_errors(browser) == []
    assert len(browser.find_elements("css selector", "#distribution circle.run")) == 6
    assert text_of(browser, "#about").startswith("A hyperfine export")


def hyperfine_export(path, commands, **extra):
    """What hyperfine 1.15 writes: its keys only, no memory."""
    keys = ("mean", "stddev", "median", "user", "system", "min", "max")
    results = [
        {
            "command": name,
            **dict.fromkeys(keys, sum(times) / len(times)),
            "times": times,
            "exit_codes": [0] * len(times),
            **extra,
        }
        for name, times in commands
    ]
    path.write_text(json.dumps({"results": results}, indent=2))
    return path


def boxes_of(browser, selector: str) -> list[dict]:
    """Each element's box in CSS pixels, and its SVG's."""
    return browser.execute_script(
        """return Array.from(document.querySelectorAll(arguments[0])).map(e => {
            const r = e.getBoundingClientRect(), s = e.ownerSVGElement.getBoundingClientRect();
            return {text: e.textContent, left: r.left, right: r.right, svg_left: s.left, svg_right: s.right};
        });""",
        selector,
    )


def round_steps(labels: list[str]) -> bool:
    """The tick values go up by one step of 1, 2 or 5 times a power of ten."""
    values = [float(label.split()[0]) for label in labels]
    steps = {round(b - a, 9) for a, b in zip(values, values[1:])}
    if len(steps) != 1:
        return False
    step = steps.pop()
    mantissa = step / 10 ** math.floor(math.log10(step))
    return any(abs(mantissa - m) < 1e-6 for m in (1, 2, 5))


# A spread the old page labelled 243.14, 468.85, 694.56 ms ... "1371.69 r" (cut at the edge).
GZIP = [("gzip -1", [0.2622, 0.2431, 0.3058, 0.2511]), ("gzip -9", [1.3717, 1.2674, 1.3912, 1.3301])]


def test_axes_have_round_ticks_and_every_label_fits_inside_its_drawing(browser, tmp_path):  # noqa: F811
    exported = hyperfine_export(tmp_path / "gzip.json", GZIP)
    page = tmp_path / "gzip.html"
    assert run_cli("report", exported, "-o", page).returncode == 0
    open_page(browser, page)
    labels = [t.text for t in browser.find_elements("css selector", "#distribution text[text-anchor=middle]")]
    assert round_steps(labels) and all(re.fullmatch(r"\d+(\.\d+)? (s|ms|µs)", label) for label in labels), labels
    assert len(labels) >= 3
    for where in ("#distribution text", "#sequence text"):
        for box in boxes_of(browser, where):
            assert box["svg_left"] - 0.5 <= box["left"] and box["right"] <= box["svg_right"] + 0.5, box
    times = [t.text for t in browser.find_elements("css selector", "#sequence text.y-tick")]
    runs = [t.text for t in browser.find_elements("css selector", "#sequence text.x-tick")]
    assert round_steps(times) and all(label.endswith(" s") for label in times), times  # "Runs in order": a time axis
    assert round_steps(runs) and runs[0] == "0" and len(runs) >= 3, runs
    means = [
        row.find_elements("css selector", "td")[2].text
        for row in browser.find_elements("css selector", "#summary tbody tr")
    ]
    assert means[0] == "265.6 ± 28.0 ms" and means[1] == "1.340 ± 0.055 s", means  # was "262.594 ms ± 19.906"


def test_a_hyperfine_export_is_described_as_one(browser, tmp_path):  # noqa: F811
    exported = hyperfine_export(tmp_path / "hyperfine.json", GZIP)
    page = tmp_path / "hyperfine.html"
    assert run_cli("report", exported, "-o", page).returncode == 0
    open_page(browser, page)
    about = text_of(browser, "#about")
    assert about.startswith("A hyperfine export") and "exec to its reap" not in about
    first = [
        float(c.get_attribute("cx")) for c in browser.find_elements("css selector", "#sequence circle.seq.series-0")
    ]
    second = [
        float(c.get_attribute("cx")) for c in browser.find_elements("css selector", "#sequence circle.seq.series-1")
    ]
    assert first == sorted(first) and max(first) < min(second)  # sequential: all of one, then the next
    assert "Not measured" in text_of(browser, "#memory-unmeasured")
    assert browser.find_elements("css selector", "#memory") == []  # no bars, no marks at 0
    memory = [
        row.find_elements("css selector", "td.memory")[0].text
        for row in browser.find_elements("css selector", "#summary tbody tr")
    ]
    assert memory == ["not measured", "not measured"]
    assert console_errors(browser) == []


def test_memory_has_a_scale_and_its_figures(browser, tmp_path):  # noqa: F811
    """hyperfine 1.16+ writes each run's memory: drawn on a byte scale, with the numbers."""
    exported = hyperfine_export(tmp_path / "memory.json", GZIP, memory_usage_byte=[3 << 20, 5 << 20, 4 << 20, 4 << 20])
    page = tmp_path / "memory.html"
    assert run_cli("report", exported, "-o", page).returncode == 0
    open_page(browser, page)
    ticks = [t.text for t in browser.find_elements("css selector", "#memory text.tick")]
    assert round_steps(ticks) and all(t.endswith(" MiB") for t in ticks), ticks
    figures = [t.text for t in browser.find_elements("css selector", "#memory text.figures")]
    assert figures == ["mean 4.0 MiB, max 5.0 MiB"] * 2
    for box in boxes_of(browser, "#memory text"):
        assert box["right"] <= box["svg_right"] + 0.5, box


def test_report_old_new_draws_the_comparison(browser, tmp_path):  # noqa: F811
    old = hyperfine_export(
        tmp_path / "old.json",
        [("a", [0.010, 0.011, 0.012, 0.010, 0.011]), ("b", [0.05] * 5), ("c", [0.2, 0.21, 0.2, 0.22, 0.2])],
    )
    new = hyperfine_export(
        tmp_path / "new.json",
        [
            ("a", [0.020, 0.021, 0.022, 0.020, 0.021]),
            ("b", [0.049, 0.051, 0.05, 0.05, 0.05]),
            ("c", [0.1, 0.11, 0.1, 0.1, 0.12]),
            ("d", [0.01] * 5),
        ],
    )
    page = tmp_path / "against.html"
    made = run_cli("report", old, new, "-o", page)
    assert made.returncode == 0, made.stderr
    assert b"against" in made.stdout
    open_page(browser, page)
    rows = [
        [td.text for td in row.find_elements("css selector", "td")]
        for row in browser.find_elements("css selector", "#baseline tbody tr")
    ]
    assert [(row[0], row[-1]) for row in rows] == [
        ("a", "slower"), ("b", "no significant change"), ("c", "faster"), ("d", "not in the baseline"),
    ]  # fmt: skip
    assert rows[0][3].startswith("1.9") and " ± " in rows[0][3] and float(rows[0][4]) < 0.05
    assert len(browser.find_elements("css selector", "#distribution g.baseline rect.box")) == 3
    assert len(browser.find_elements("css selector", "#distribution g.current rect.box")) == 4
    assert console_errors(browser) == []


def test_report_refuses_a_stream_beside_an_export(tmp_path):
    old = hyperfine_export(tmp_path / "old.json", [("a", [0.01, 0.02])])
    stream = tmp_path / "run.jsonl"
    assert run_cli("run", "--jsonl", stream, "--", "true").returncode == 0
    done = run_cli("report", old, stream, "-o", tmp_path / "page.html")
    assert done.returncode == 100 and b"two to compare (OLD.json NEW.json)" in done.stderr
    three = run_cli("report", old, old, old, "-o", tmp_path / "page.html")
    assert three.returncode == 100 and b"one benchmark export, or two" in three.stderr


def test_sequential_warm_ups_are_drawn_where_they_ran(browser, tmp_path):  # noqa: F811
    """--order sequential: a command's warm-up runs come just before its own runs, after the
    previous command's (interleaved ones come first, as test_the_bench_page_... shows)."""
    exported, page = tmp_path / "sequential.json", tmp_path / "sequential.html"
    done = run_cli("bench", "--runs", "2", "--warmup", "1", "--order", "sequential", "--command", '["true"]',
                   "--command", '["sleep", "0.01"]', "--export-json", exported)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert run_cli("report", exported, "-o", page).returncode == 0
    open_page(browser, page)

    def xs(selector):
        return [float(c.get_attribute("cx")) for c in browser.find_elements("css selector", f"#sequence {selector}")]

    (second_warmup,) = xs("circle.warmup.series-1")
    assert max(xs("circle.seq.series-0")) < second_warmup < min(xs("circle.seq.series-1"))
    assert xs("circle.warmup.series-0")[0] < min(xs("circle.seq.series-0"))


def test_a_null_ratio_and_a_reference_are_drawn(tmp_path):
    """An export is strict JSON: a ratio over a mean of 0 is null (main's report of it was 104); and
    an export made with --reference is drawn against that reference, not the fastest."""
    zero = {"command": "zero", "mean": 0.0, "stddev": 0.0, "median": 0.0, "user": 0.0, "system": 0.0,
            "min": 0.0, "max": 0.0, "times": [0.0, 0.0, 0.0], "exit_codes": [0, 0, 0]}  # fmt: skip
    other = {**zero, "command": "other", "mean": 0.1, "times": [0.1, 0.1, 0.2]}
    comparison = {"metric": "wall", "fastest": "zero", "reference": "zero",
                  "commands": [{"command": "other", "ratio": None, "ratio_stddev": None}]}  # fmt: skip
    exported, page = tmp_path / "zero.json", tmp_path / "zero.html"
    exported.write_text(json.dumps({"results": [zero, other], "comparison": comparison,
                                    "processkit": {"format": "processkit-bench/1"}}))  # fmt: skip
    done = run_cli("report", exported, "-o", page)
    assert done.returncode == 0, done.stderr
    assert "no ratio, the fastest's mean is 0" in page.read_text()
    referenced = tmp_path / "reference.json"
    done = run_cli("bench", "-N", "--runs", "3", "true", "--reference", "sleep 0.01", "--export-json", referenced)
    assert done.returncode == 0, done.stderr
    assert run_cli("report", referenced, "-o", page).returncode == 0
    assert 'against the reference, <span class="mono">sleep 0.01</span>' in page.read_text()
