"""A manifest's job graph (``needs``, make's habit) and its weights and groups (``slots``,
``group`` with ``--group-limit``, nextest's), through the real CLI and real children.

Each job appends ``start ID`` and ``end ID`` to one log (O_APPEND, one write each), so the order
the batch really ran them in is read back from what the children did.
"""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from streams import PY

BATCH_FAILED, USAGE = 117, 100
# Logs its start, waits (at most a minute, else exit 1) until the job ``argv[5]`` (if any) has
# logged its own, sleeps, logs its end.
LOGGED = (
    "import os,sys,time\n"
    "log=os.open(sys.argv[1], os.O_WRONLY|os.O_APPEND)\n"
    "os.write(log, ('start '+sys.argv[2]+'\\n').encode())\n"
    "end=time.monotonic()+60\n"
    "while sys.argv[5] and 'start '+sys.argv[5] not in open(sys.argv[1]).read().splitlines():\n"
    "    if time.monotonic()>end: sys.exit(1)\n"
    "    time.sleep(0.01)\n"
    "time.sleep(float(sys.argv[3]))\n"
    "os.write(log, ('end '+sys.argv[2]+'\\n').encode())\n"
    "sys.exit(int(sys.argv[4]))\n"
)


def job(log, job_id: str, *, sleep: float = 0.0, code: int = 0, after: str = "", **keys) -> dict:
    return {"id": job_id, "args": [PY, "-c", LOGGED, str(log), job_id, str(sleep), str(code), after], **keys}


def batch(tmp_path, jobs, *flags):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(item) + "\n" for item in jobs))
    return run_cli("batch", manifest, "--out", tmp_path / "out", *flags)


def events(log) -> list[tuple[str, str]]:
    return [tuple(line.split(" ", 1)) for line in log.read_text().splitlines()]  # type: ignore[misc]


def lines(tmp_path) -> dict[str, dict]:
    return {line["id"]: line for line in map(json.loads, (tmp_path / "out" / "summary.jsonl").read_text().splitlines())}


def test_a_job_starts_only_once_every_need_exited_0(tmp_path):
    log = tmp_path / "log"
    log.touch()
    jobs = [
        # ends once lint has started: a lint held back until its end would leave it waiting
        # (not a 0.2 s sleep, which a loaded host could let pass before lint's interpreter starts)
        job(log, "compile-a", after="lint"),
        job(log, "compile-b", sleep=0.05),
        job(log, "link", needs=["compile-a", "compile-b"]),
        job(log, "test", needs=["link"]),
        job(log, "lint"),
    ]
    result = batch(tmp_path, jobs, "--jobs", "4")
    assert result.returncode == 0, result.stderr
    order = events(log)
    at = {entry: index for index, entry in enumerate(order)}
    assert at[("start", "link")] > max(at[("end", "compile-a")], at[("end", "compile-b")])
    assert at[("start", "test")] > at[("end", "link")]
    assert at[("start", "lint")] < at[("end", "compile-a")], "an independent job does not wait"
    assert lines(tmp_path)["link"]["needs"] == ["compile-a", "compile-b"]
    assert "needs" not in lines(tmp_path)["lint"], "an optional field only where it says something"


def test_a_failed_need_skips_everything_below_it_and_the_rest_goes_on(tmp_path):
    log = tmp_path / "log"
    log.touch()
    jobs = [
        job(log, "gen", code=3),
        job(log, "slow", sleep=5, timeout="300ms"),
        job(log, "build", needs=["gen"]),
        job(log, "pack", needs=["build"]),
        job(log, "after-slow", needs=["slow"]),
        job(log, "docs"),
        job(log, "docs-check", needs=["docs"]),
    ]
    result = batch(tmp_path, jobs, "--jobs", "2")
    assert result.returncode == BATCH_FAILED
    found = lines(tmp_path)
    assert found["build"]["source"] == "skipped" and found["build"]["exit_code"] is None
    assert found["build"]["skipped_for"] == "gen" and "(exit 3)" in found["build"]["message"]
    assert found["pack"]["skipped_for"] == "build" and "(skipped)" in found["pack"]["message"]
    assert found["after-slow"]["skipped_for"] == "slow" and "timed out" in found["after-slow"]["message"]
    assert found["docs-check"]["exit_code"] == 0, "make -k: what does not depend on the failure runs"
    started = {name for kind, name in events(log) if kind == "start"}
    assert started - {"slow"} == {"gen", "docs", "docs-check"}  # slow may time out before its first write
    stderr = result.stderr.decode()
    assert "batch: build: skipped, its need gen did not exit 0 (exit 3)" in stderr
    assert "3 skipped (a need did not exit 0)" in stderr


def test_halt_on_failure_still_halts_a_graph(tmp_path):
    log = tmp_path / "log"
    log.touch()
    jobs = [job(log, "first", code=1), job(log, "second", needs=["first"]), job(log, "other", needs=["third"])]
    jobs.append(job(log, "third", sleep=0.2))
    result = batch(tmp_path, jobs, "--jobs", "1", "--halt-on-failure")
    assert result.returncode == BATCH_FAILED
    found = lines(tmp_path)
    assert found["second"]["source"] == "skipped"
    assert found["third"]["source"] == "halted" and found["other"]["source"] == "halted"


@pytest.mark.parametrize(
    "needs, message",
    [
        ({"a": ["b"], "b": ["c"], "c": ["a"]}, "cycle: a -> b -> c -> a"),
        ({"a": ["a"]}, "cycle: a -> a"),
        ({"a": ["nobody"]}, "job a needs 'nobody', which no job of the manifest is"),
    ],
)
def test_a_cycle_or_an_unknown_need_is_a_usage_error_before_anything_starts(tmp_path, needs, message):
    marker = tmp_path / "ran"
    jobs = [{"id": "z", "args": ["touch", str(marker)]}]
    jobs += [{"id": name, "args": ["true"], "needs": wanted} for name, wanted in needs.items()]
    jobs += [{"id": name, "args": ["true"]} for name in "abc" if name not in needs]
    result = batch(tmp_path, jobs)
    assert result.returncode == USAGE and message in result.stderr.decode(), result.stderr
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_history_starts_the_longest_remaining_path_first(tmp_path):
    """``short`` alone took 1 s, ``long`` 5 s; ``short`` leads to ``tail`` (10 s): the path
    through ``short`` (11 s) is the critical one, so it starts before ``long``."""
    log = tmp_path / "log"
    log.touch()
    history = tmp_path / "history.jsonl"
    took = {"long": 5000, "short": 1000, "tail": 10000}
    history.write_text("".join(json.dumps({"id": k, "exit_code": 0, "duration_ms": v}) + "\n" for k, v in took.items()))
    jobs = [job(log, "long"), job(log, "short"), job(log, "tail", needs=["short"])]
    result = batch(tmp_path, jobs, "--jobs", "1", "--history", history)
    assert result.returncode == 0, result.stderr
    assert [name for kind, name in events(log) if kind == "start"] == ["short", "tail", "long"]


def test_the_trace_and_the_page_show_which_job_waited_for_which(tmp_path):
    log = tmp_path / "log"
    log.touch()
    jobs = [job(log, "build", sleep=0.05), job(log, "test", needs=["build"])]
    trace = tmp_path / "trace.json"
    result = batch(tmp_path, jobs, "--trace", trace)
    assert result.returncode == 0, result.stderr
    events_ = json.loads(trace.read_text())["traceEvents"]
    flows = [event for event in events_ if event.get("cat") == "needs"]
    assert [event["ph"] for event in flows] == ["s", "f"]
    slices = {event["name"]: event for event in events_ if event.get("ph") == "X"}
    build, test = slices["build"], slices["test"]
    assert build["ts"] <= flows[0]["ts"] <= build["ts"] + build["dur"]
    assert flows[1]["ts"] == test["ts"] and test["args"]["needs"] == ["build"]
    assert "waited for build" in (tmp_path / "out" / "index.html").read_text()


def test_resume_counts_a_need_that_passed_before_as_met(tmp_path):
    log = tmp_path / "log"
    log.touch()
    jobs = [job(log, "gen"), job(log, "use", needs=["gen"], code=1)]
    assert batch(tmp_path, jobs).returncode == BATCH_FAILED
    jobs[1] = job(log, "use", needs=["gen"])
    log.write_text("")
    result = batch(tmp_path, jobs, "--resume")
    assert result.returncode == 0, result.stderr
    assert [name for kind, name in events(log) if kind == "start"] == ["use"]


def most_at_once(log, weight) -> int:
    """The largest sum of ``weight(id)`` over the jobs running at once, from the log's order."""
    running = 0
    most = 0
    for kind, name in events(log):
        running += weight(name) if kind == "start" else -weight(name)
        most = max(most, running)
    return most


def test_a_job_takes_its_slots_of_jobs(tmp_path):
    log = tmp_path / "log"
    log.touch()
    jobs = [job(log, f"wide{n}", sleep=0.2, slots=2) for n in range(3)]
    jobs += [job(log, f"narrow{n}", sleep=0.2) for n in range(4)]
    jobs.append(job(log, "huge", sleep=0.1, slots=99))  # more than --jobs: all of them, alone
    result = batch(tmp_path, jobs, "--jobs", "3")
    assert result.returncode == 0, result.stderr
    weights = {**{f"wide{n}": 2 for n in range(3)}, "huge": 3}
    assert most_at_once(log, lambda name: weights.get(name, 1)) <= 3
    assert most_at_once(log, lambda name: 1) >= 2, "slots left beside a wide job are used"


def test_a_group_limit_keeps_the_groups_jobs_apart_and_the_others_go_on(tmp_path):
    log = tmp_path / "log"
    log.touch()
    # db0 ends only once every unit job ended: were the held-back db jobs holding the queue, the
    # unit jobs would never start and db0 would give up (exit 1) after 30 s.
    waits = (
        "import os,sys,time\nlog=os.open(sys.argv[1], os.O_WRONLY|os.O_APPEND)\nos.write(log, b'start db0\\n')\n"
        "for _ in range(3000):\n  if open(sys.argv[1]).read().count('end unit')==4: break\n  time.sleep(0.01)\n"
        "else: sys.exit(1)\nos.write(log, b'end db0\\n')"
    )
    jobs = [{"id": "db0", "args": [PY, "-c", waits, str(log)], "group": "database"}]
    jobs += [job(log, f"db{n}", sleep=0.1, group="database") for n in (1, 2)]
    jobs += [job(log, f"unit{n}") for n in range(4)]
    result = batch(tmp_path, jobs, "--jobs", "4", "--group-limit", "database=1")
    assert result.returncode == 0, result.stderr
    assert most_at_once(log, lambda name: name.startswith("db")) == 1
    for flag in ("database", "database=0", "bad name=1"):
        refused = batch(tmp_path, jobs, "--group-limit", flag)
        assert refused.returncode == USAGE, refused.stderr


def test_a_batch_asks_once_whether_its_jobs_are_a_graph(tmp_path, monkeypatch):
    """``run_batch`` decides whether its jobs hold ``needs`` and tells the recorder (and so
    ``--resume``'s dependents) and the schedule: the question is asked of the jobs once, not by
    each part again (three passes over a held list, before)."""
    from processkit.batching import graph, on_host, recorder
    from processkit.batching.manifest import jobs_from
    from processkit.batching.on_host import Settings, run_batch

    asked: list[int] = []
    has_needs = graph.has_needs

    def counted(jobs) -> bool:
        asked.append(1)
        return has_needs(jobs)

    for module in (graph, on_host, recorder):
        monkeypatch.setattr(module, "has_needs", counted, raising=False)
    jobs = jobs_from([{"id": "a", "args": ["true"]}, {"id": "b", "args": ["true"], "needs": ["a"]}])
    out = str(tmp_path / "out")
    run_batch(jobs, Settings(out, 1), signals=False)
    (tmp_path / "out" / "summary.jsonl").write_text("")  # nothing passed before: both run again
    asked.clear()
    lines, _ = run_batch(jobs, Settings(out, 1, resume=True), signals=False)
    assert sorted(line.id for line in lines) == ["a", "b"] and len(asked) == 1, asked


def test_a_need_that_exits_0_after_another_need_failed_leaves_the_skip_standing(tmp_path):
    """``c`` needs ``a`` and ``b``; ``b`` fails and ``c`` is skipped while ``a`` still runs. ``a``
    ends only once ``c``'s skipped line is in summary.jsonl, then exits 0: that success met a
    job no longer waiting (an internal error, 104, once)."""
    summary = tmp_path / "out" / "summary.jsonl"
    waits = (
        "import json,sys,time\n"
        "end=time.monotonic()+60\n"
        "while time.monotonic()<end:\n"
        "    try: ids=[json.loads(l)['id'] for l in open(sys.argv[1]).read().splitlines()]\n"
        "    except (OSError, ValueError): ids=[]\n"
        "    if 'c' in ids: sys.exit(0)\n"
        "    time.sleep(0.01)\n"
        "sys.exit(1)\n"
    )
    jobs = [
        {"id": "a", "args": [PY, "-c", waits, str(summary)]},
        {"id": "b", "args": ["false"]},
        {"id": "c", "args": ["true"], "needs": ["a", "b"]},
    ]
    proc = batch(tmp_path, jobs, "--jobs", "2")
    assert proc.returncode == BATCH_FAILED, proc.stderr
    assert b"internal error" not in proc.stderr
    got = lines(tmp_path)
    assert (got["a"]["exit_code"], got["b"]["exit_code"]) == (0, 1)
    assert got["c"]["exit_code"] is None and "b" in got["c"]["message"]
