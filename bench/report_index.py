"""`report` over many runs: how long 100 and 1,000 synthetic streams take to render into one
index page (alternating, medians), and how the 1,000-run page behaves in headless Chromium
(load time, a sort click, DOM size).

The streams are synthetic but schema-valid, in the shapes a build farm's night produces:
mostly clean exits, some failures and timeouts, a few cut short by a killed runner; each with
interval snapshots of a small tree and captured output.

    python3 bench/report_index.py            # -n 5 rounds; --no-browser to skip Chromium
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
import headless_chromium  # noqa: E402
from side_by_side import measure  # noqa: E402

CLI = os.path.join(os.path.dirname(sys.executable), "processkit-cli")


def _at(ms: int) -> str:
    seconds, ms = divmod(ms, 1000)
    minutes, seconds = divmod(seconds, 60)
    return f"2026-01-01T03:{minutes % 60:02d}:{seconds:02d}.{ms:03d}Z"


def stream_events(index: int, rng: random.Random) -> list[dict]:
    """One run's events; the shape is picked by ``index`` so every sweep has the same mix."""
    duration = int(rng.lognormvariate(8, 1))
    shape = "timeout" if index % 17 == 0 else "failed" if index % 9 == 0 else "killed" if index % 50 == 0 else "ok"
    root = 10_000 + index * 4

    def event(name, ms, **fields):
        return {"schema_version": 1, "time": _at(ms), "event": name, **fields}

    members = [
        {"pid": root + k, "ppid": root if k else 1, "name": ["make", "cc", "ld"][k], "start_time": str(root + k)}
        for k in range(3)
    ]
    events = [
        event(
            "run_started",
            0,
            run_id=f"step-{index:04d}",
            labels={"night": "42", "target": f"t{index % 13}"},
            root_pid=root,
            mechanism="cgroup_v2",
            abrupt_cleanup="direct_child_only",
            cwd="/build",
            command={"redacted": True, "argv": None, "argv_sha256": f"{index:064x}", "hint": None},
        ),
        event("members_snapshot", 1, reason="spawn", read_error=False, members=members[:1]),
    ]
    events += [
        event("members_snapshot", t, reason="interval", read_error=False, members=members)
        for t in range(500, duration, 500)
    ]
    if shape == "killed":
        return events
    if shape == "timeout":
        events.append(event("timeout", duration, timeout_ms=duration, grace_ms=2000, reason="overall"))
    else:
        events.append(event("root_exited", duration, outcome="exited", code=0 if shape == "ok" else 2, signal=None))
    events += [
        event(
            "resource_summary",
            duration,
            read_error=False,
            peak_memory_bytes=rng.randrange(1 << 20, 1 << 30),
            total_cpu_ms=rng.randrange(duration + 1),
            io_read_bytes=None,
            io_write_bytes=None,
            peak_process_count=3,
        ),
        event("cleanup_started", duration, members_before=0, read_error=False),
        event(
            "cleanup_finished",
            duration + 2,
            remaining=0,
            remaining_pids=[],
            soft_terminate=None,
            shutdown=None,
            read_error=False,
            kill_error=False,
        ),
    ]
    size = rng.randrange(100, 1 << 20)
    captured = {
        "bytes": size,
        "bytes_seen": size,
        "bytes_written": size,
        "sha256": "0" * 64,
        "truncated": False,
        "write_error": False,
    }
    events.append(
        event(
            "output_captured",
            duration + 3,
            stdout={"path": "cap/stdout.log", **captured},
            stderr={"path": "cap/stderr.log", **captured},
        )
    )
    code = {"ok": 0, "failed": 2, "timeout": 106}[shape]
    events.append(
        event(
            "runner_exit",
            duration + 4,
            code=code,
            source="timeout" if shape == "timeout" else "child_exit",
            child_code=None if shape == "timeout" else code,
        )
    )
    return events


def generate(directory: str, count: int) -> None:
    rng = random.Random(count)
    os.makedirs(directory)
    for index in range(count):
        lines = (json.dumps(e, separators=(",", ":")) + "\n" for e in stream_events(index, rng))
        with open(os.path.join(directory, f"step-{index:04d}.jsonl"), "w") as file:
            file.writelines(lines)


def browse(page: str) -> dict:
    with tempfile.TemporaryDirectory() as profile:
        driver = headless_chromium.start("/usr/bin/chromium", "/usr/bin/chromedriver", profile)
        try:
            driver.get("file://" + page)
            load = driver.execute_script(
                "const t = performance.getEntriesByType('navigation')[0]; return t.loadEventEnd - t.startTime;"
            )
            sorts = []
            for _ in range(3):
                sorts.append(
                    driver.execute_script(
                        "const th = [...document.querySelectorAll('table.runs th')].find(h => h.textContent === 'duration');"
                        "const t = performance.now(); th.click(); document.body.offsetHeight; return performance.now() - t;"
                    )
                )
            nodes = driver.execute_script("return document.getElementsByTagName('*').length;")
        finally:
            driver.quit()
    return {"load_ms": load, "sort_ms": statistics.median(sorts), "elements": nodes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5, help="counted rounds")
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        sizes = (100, 1000)
        for count in sizes:
            generate(os.path.join(work, str(count)), count)
        commands = {
            count: [CLI, "report", os.path.join(work, str(count)), "-o", os.path.join(work, f"{count}.html")]
            for count in sizes
        }
        for argv in commands.values():
            assert measure(argv)["code"] == 0, argv  # warm-up, and a check
        results = {count: [] for count in sizes}
        for _ in range(args.n):
            for count, argv in commands.items():
                results[count].append(measure(argv))
        for count in sizes:
            wall = statistics.median(r["wall"] for r in results[count])
            cpu = statistics.median(r["cpu"] for r in results[count])
            rss = statistics.median(r["rss_mib"] for r in results[count])
            page = os.path.getsize(os.path.join(work, f"{count}.html"))
            print(
                f"{count:5d} runs: wall median {wall:.2f} s (min {min(r['wall'] for r in results[count]):.2f}, "
                f"max {max(r['wall'] for r in results[count]):.2f}), CPU median {cpu:.2f} s, peak RSS {rss:.1f} MiB, page {page / 2**20:.2f} MiB"
            )
        ratios = [b["wall"] / a["wall"] for a, b in zip(results[100], results[1000])]
        print(f"1000/100 wall ratio: median {statistics.median(ratios):.2f}")
        print(f"load average after the renders: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        if not args.no_browser:
            seen = browse(os.path.join(work, "1000.html"))
            print(
                f"Chromium, 1000-run page: load {seen['load_ms']:.0f} ms, sort by duration {seen['sort_ms']:.0f} ms "
                f"(median of 3 clicks), {seen['elements']} elements"
            )


if __name__ == "__main__":
    main()
