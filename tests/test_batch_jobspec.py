"""A manifest job's RunSpec is the one ``run`` parses from the equivalent command line.

The manifest reads a line's keys into typed values and builds the template with the run grammar
(``grammar.run.build``); the batch (``on_host``) builds each attempt's spec from that template
(``manifest.job_spec``). These properties hold it to the spec ``cli.run.parse`` builds from the
flags the keywords spell (``run_spelling``), over generated keywords."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from processkit.batching.manifest import job_spec, parse
from processkit.cli.run import parse as parse_run
from processkit.errors import Failure
from processkit.grammar.keywords import command_args
from run_spelling import run_argv

KEY = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
TEXT = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=8)
KEYWORDS = st.fixed_dictionaries(
    {},
    optional={
        "timeout": st.one_of(st.integers(1, 10**6), st.sampled_from(["250ms", "3s", "1m"])),
        "idle_timeout": st.integers(1, 10**4),
        "grace": st.one_of(st.integers(0, 100), st.just(0.5)),
        "snapshot_interval": st.just("2s"),
        "max_memory": st.one_of(st.integers(1 << 20, 1 << 40), st.sampled_from(["64m", "1g"])),
        "max_processes": st.integers(0, 4096),
        "cpu_quota": st.sampled_from([0.5, 1, 2.25]),
        "cwd": TEXT,
        "capture_max_bytes": st.sampled_from([0, 1024, "8m", "-1"]),
        "capture_overflow": st.sampled_from(["truncate", "cancel"]),
        "capture_keep": st.sampled_from(["head", "tail", "head-tail"]),
        "stdin_file": TEXT,
        "argv_raw": st.booleans(),
        "env_clear": st.booleans(),
        "env_remove": st.lists(KEY, max_size=2),
        "env": st.dictionaries(KEY, TEXT, max_size=2),
        "labels": st.dictionaries(st.sampled_from(["team", "k"]), TEXT, max_size=2),  # batch: its own, refused
        "run_id_env": st.sampled_from(["PK_RUN", "k", "1bad"]),
        "run_id": st.sampled_from([None, "named-run"]),
    },
)
ARGS = st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=3)


@settings(max_examples=150, deadline=None)
@given(keywords=KEYWORDS, args=ARGS, repeats=st.integers(1, 3))
def test_a_jobs_spec_is_what_run_parses_from_its_argv(keywords, args, repeats):
    # A run id names one job of a manifest (a repeated one is refused), so each line gets its own.
    per_job = [
        {**keywords, "run_id": f"{keywords['run_id']}-{n}"} if keywords.get("run_id") else keywords
        for n in range(repeats)
    ]
    lines = [json.dumps({"args": args, "id": f"j{n}", **own}).encode() for n, own in enumerate(per_job)]
    extra = ("--no-echo", "--capture-dir", "c", "--label", "batch=b")
    try:
        jobs = parse(lines)
    except Failure:  # refused by the manifest: refused by run's parser as well
        with pytest.raises(Failure):  # the args first, then the flags
            command_args(args)
            parse_run(run_argv(per_job[0], jsonl="e", extra=extra) + ["--", *args])
        return
    for job, own in zip(jobs, per_job):
        paths = {"jsonl": f"out/{job.id}/events.jsonl", "capture_dir": f"out/{job.id}/capture"}
        built = job_spec(job, label="batch-7-1", **paths)
        extra = ("--no-echo", "--capture-dir", paths["capture_dir"], "--label", "batch=batch-7-1")
        parsed = parse_run(run_argv(own, jsonl=paths["jsonl"], extra=extra) + ["--", *args])
        if not parsed.run_id_given:  # a fresh id each: the same shape, not the same value
            assert built.run_id.startswith("run-") and built.run_id != parsed.run_id
            built = built.replace(run_id=parsed.run_id)
        assert built == parsed


def test_jobs_with_the_same_keywords_share_one_parsed_template():
    lines = [json.dumps({"args": [f"prog{n}"], "timeout": 2}).encode() for n in range(3)]
    lines.append(json.dumps({"args": ["other"], "timeout": 3}).encode())
    jobs = parse(lines)
    assert jobs[0].template is jobs[1].template is jobs[2].template
    assert jobs[3].template is not jobs[0].template and jobs[3].template.timeout_ms == 3000
    assert [job_spec(job, jsonl="e", capture_dir="c", label="b").argv for job in jobs] == [
        ("prog0",),
        ("prog1",),
        ("prog2",),
        ("other",),
    ]


def test_each_attempt_gets_its_own_run_id_unless_the_job_names_one():
    fresh, named = parse([b'{"args": ["true"]}', b'{"args": ["true"], "id": "n", "run_id": "mine"}'])
    first, second = (job_spec(fresh, jsonl="e", capture_dir="c", label="b") for _ in range(2))
    assert first.run_id != second.run_id and not first.run_id_given
    assert job_spec(named, jsonl="e", capture_dir="c", label="b").run_id == "mine"
