"""A batch page's "CPU (all jobs)" in the real browser: a sum over the jobs whose CPU was
measured, said so when some were not, and no figure at all when none was (null in
``resource_summary`` means "not accounted for", never 0)."""

from __future__ import annotations

from test_batch import write_manifest
from test_report_browser import browser, open_page, rendered, summary_line, text_of  # noqa: F401


def cpu_total(browser, tmp_path, cpus) -> str:  # noqa: F811 - the fixture, imported
    out = tmp_path / "out"
    out.mkdir()
    lines = []
    for number, cpu in enumerate(cpus):
        line = summary_line(f"job{number}", "2026-01-01T00:00:00.000000Z", 1500.0, 0, "child_exit")
        line["resources"] = {"total_cpu_ms": cpu}
        lines.append(line)
    write_manifest(out / "summary.jsonl", lines)
    page = open_page(browser, rendered(tmp_path, out))
    terms = [term.text for term in page.find_elements("css selector", "dl.totals dt")]
    return page.find_elements("css selector", "dl.totals dd")[terms.index("CPU (all jobs)")].text


def test_no_job_measured_gives_no_total(browser, tmp_path):  # noqa: F811
    assert cpu_total(browser, tmp_path, [None, None]) == "—"


def test_a_total_over_some_jobs_says_over_how_many(browser, tmp_path):  # noqa: F811
    assert cpu_total(browser, tmp_path, [700, None, 300]) == "1 s (2 of 3 jobs measured)"


def test_every_job_measured_is_the_plain_sum(browser, tmp_path):  # noqa: F811
    assert cpu_total(browser, tmp_path, [700, 300]) == "1 s"
