"""``report BENCH.json``: the benchmark's page in a real headless Chromium."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from test_report_browser import browser, console_errors, open_page, text_of  # noqa: F401 - the fixture

pytestmark = pytest.mark.usefixtures("browser")


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
    cpu_column = headers.index("CPU (user+system) ± σ")
    assert all(" ms" in row.find_elements("css selector", "td")[cpu_column].text for row in rows)
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
    assert "as hyperfine ran them" in browser.find_element("css selector", "p.muted").text
