"""``report`` on crafted benchmark exports (issue 33): each is drawn, or refused with one clear
line naming the file and the field (114), never an internal error (104), and a huge one is
drawn within bounded memory. Process-level through ``processkit-cli report``; a property test
of the checked model beside it for the shapes a table cannot list."""

from __future__ import annotations

import json
import resource

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_cli

GOOD = {"command": "a", "mean": 0.01, "stddev": 0.001, "median": 0.01, "user": 0.001, "system": 0.002,
        "min": 0.009, "max": 0.012, "times": [0.010, 0.012, 0.009], "exit_codes": [0, 0, 0]}  # fmt: skip
DIGITS_4000 = "9" * 4000


def result(**changes) -> dict:
    record = dict(GOOD)
    for key, value in changes.items():
        if value is KeyError:
            record.pop(key)
        else:
            record[key] = value
    return record


def export(*results, **top) -> str:
    return json.dumps({"results": list(results), **top})


# (case, the file's text, None when it is drawn, else what the one-line refusal names)
CASES = [
    ("a result without user", export(result(user=KeyError)), None),
    ("user null", export(result(user=None)), None),
    ("min null", export(result(min=None)), None),
    ("a single run, stddev null", export(result(times=[0.5], stddev=None)), None),
    ("no runs", export(result(times=[])), None),
    ("no results", export(), None),
    ("only command and times", export({"command": "x", "times": [0.1, 0.2]}), None),
    ("an integer time", export(result(times=[1, 2, 0])), None),
    ("exit code null (killed)", export(result(exit_codes=[0, None, 0])), None),
    ("an empty name", export(result(command="")), None),
    ("a hostile name", export(result(command="<script>alert(1)</script>\x1b[2J")), None),
    ("a 1 MB name", export(result(command="n" * 1_000_000)), None),
    ("an unused field nested 500 deep", export(result(parameters={"p": json.loads("[" * 500 + "]" * 500)})), "nested more than 64 deep"),  # bounded.MAX_DEPTH, for every JSON input
    ("3,000 commands, one of 5,000 runs", export(result(times=[0.001] * 5000, exit_codes=None), *[result(command=f"c{i}") for i in range(3000)]), None),
    ("command 5", export(result(command=5)), "results[0].command is a number, not a string"),
    ("command null", export(result(command=None)), "results[0].command is null"),
    ("no command", export(result(command=KeyError)), "results[0].command is null"),
    ("string times", export(result(times="0.1,0.2")), "results[0].times is a string, not a list"),
    ("no times", export(result(times=KeyError)), "results[0].times is null, not a list"),
    ("a string time", export(result(times=[0.1, "0.2"])), "results[0].times[1] is a string"),
    ("a null time", export(result(times=[0.1, None])), "results[0].times[1] is null"),
    ("a boolean time", export(result(times=[True])), "results[0].times[0] is a boolean"),
    ("a negative time", export(result(times=[0.1, -0.5])), "results[0].times[1] is -0.5"),
    ("a nested time", export(result(times=[[0.1]])), "results[0].times[0] is a list"),
    ("a 4,000-digit mean", export(result()).replace('"mean": 0.01', f'"mean": {DIGITS_4000}'), "results[0].mean is an integer of about 4000 digits"),
    ("a 4,000-digit time", export(result(times=[0.1])).replace("[0.1]", f"[{DIGITS_4000}]"), "results[0].times[0] is an integer of about 4000 digits"),
    ("a float beyond range", export(result()).replace('"max": 0.012', '"max": 1e400'), "results[0].max is inf"),
    ("a huge stddev", export(result(stddev=1e300)), "results[0].stddev is 1e+300"),
    ("NaN", export(result()).replace('"median": 0.01', '"median": NaN'), "is not JSON (NaN is not a JSON value)"),
    ("Infinity", export(result()).replace('"median": 0.01', '"median": -Infinity'), "is not JSON (-Infinity is not a JSON value)"),
    ("results not a list", json.dumps({"results": {"a": 1}}), "'results' is an object, not a list"),
    ("results a number", json.dumps({"results": 7}), "'results' is a number, not a list"),
    ("a result not an object", export(5), "results[0] is a number, not an object"),
    ("order of another length", export(result(order=[0, 1])), "results[0].order has 2 entries for 3 times"),
    ("order of strings", export(result(order=["0", "1", "2"])), "results[0].order[0] is a string"),
    ("memory of strings", export(result(memory_usage_byte=["1", "2", "3"])), "results[0].memory_usage_byte[0] is a string"),
    ("memory negative", export(result(memory_usage_byte=[1, -2, 3])), "results[0].memory_usage_byte[1] is -2"),
    ("exit codes of floats", export(result(exit_codes=[0.5, 0, 0])), "results[0].exit_codes[0] is a number, not an integer"),
    ("warm-up of strings", export(result(warmup_times=["x"])), "results[0].warmup_times[0] is a string"),
    ("user times of another length", export(result(user_times=[0.1], system_times=[0.1])), "has 1 entries for 3 times"),
    ("name as a list", export(result(name=["a"])), "results[0].name is a list, not a string"),
    ("processkit a string", export(result(), processkit="x"), "'processkit' is a string, not an object"),
    ("an unknown metric", export(result(), processkit={"format": "processkit-bench/1", "metric": "fast"}), "'processkit.metric'"),
    ("floors of another length", export(result(), processkit={"format": "processkit-bench/2", "max_rss_floors_byte": [1, 2]}), "'processkit.max_rss_floors_byte' has 2 entries for 1 result"),
    ("a floor not a count", export(result(), processkit={"format": "processkit-bench/2", "max_rss_floors_byte": ["x"]}), "'processkit.max_rss_floors_byte'[0] is a string"),
    ("cpus of strings", export(result(), processkit={"format": "processkit-bench/1", "cpus": ["0"]}), "'processkit.cpus'[0] is a string"),
    ("a negative CPU quota", export(result(), processkit={"format": "processkit-bench/2", "host_load": {"cpu_quota": -1}}), "'processkit.host_load.cpu_quota' is not a number 0 or more"),
    ("no CPU given", export(result(), processkit={"format": "processkit-bench/2", "host_load": {"affinity_cpus": 0}}), "'processkit.host_load.affinity_cpus' is 0, not a count of CPUs (1 or more)"),
    ("half a CPU more", export(result(), processkit={"format": "processkit-bench/2", "host_load": {"affinity_cpus": 1.5}}), "'processkit.host_load.affinity_cpus' is a number, not an integer"),
    ("one CPU as a float", export(result(), processkit={"format": "processkit-bench/2", "host_load": {"affinity_cpus": 1.0}}), "'processkit.host_load.affinity_cpus' is a number, not an integer"),
    ("one CPU", export(result(), processkit={"format": "processkit-bench/2", "host_load": {"affinity_cpus": 1}}), None),
    ("a throttled share above 1", export(result(), processkit={"format": "processkit-bench/2", "host_load": {"throttled_share": 2}}), "'processkit.host_load.throttled_share' is not a number from 0 to 1"),
    ("a broken baseline", export(result(), processkit={"format": "processkit-bench/1"}, baseline={"file": 3}), "'baseline.file' is a number"),
    ("a baseline verdict", export(result(), processkit={"format": "processkit-bench/1"}, baseline={"file": "b", "metric": "wall", "commands": [{"command": "a", "verdict": "<b>"}]}), "baseline.commands[0].verdict"),
    ("a baseline p above 1", export(result(), processkit={"format": "processkit-bench/1"}, baseline={"file": "b", "metric": "wall", "commands": [{"command": "a", "verdict": "slower", "p_value": 2}]}), "baseline.commands[0].p_value is 2, not a number from 0 to 1"),
    ("more timed out than ran", export(result(), processkit={"format": "processkit-bench/2"}, baseline={"file": "b", "metric": "wall", "commands": [{"command": "a", "verdict": "slower", "timed_out": [5, 1, 0, 0]}]}), "baseline.commands[0].timed_out is not four counts"),
    ("the baseline's more timed out", export(result(), processkit={"format": "processkit-bench/2"}, baseline={"file": "b", "metric": "wall", "commands": [{"command": "a", "verdict": "slower", "timed_out": [1, 5, 6, 5]}]}), "baseline.commands[0].timed_out is not four counts"),
    ("none timed out", export(result(), processkit={"format": "processkit-bench/2"}, baseline={"file": "b", "metric": "wall", "commands": [{"command": "a", "verdict": "slower", "timed_out": [0, 0, 0, 0]}]}), "baseline.commands[0].timed_out is not four counts"),
    ("no larger a share than the baseline's", export(result(), processkit={"format": "processkit-bench/2"}, baseline={"file": "b", "metric": "wall", "commands": [{"command": "a", "verdict": "slower", "timed_out": [1, 5, 2, 10]}]}), "baseline.commands[0].timed_out is not four counts"),
    ("timed out, three counts", export(result(), processkit={"format": "processkit-bench/2"}, baseline={"file": "b", "metric": "wall", "commands": [{"command": "a", "verdict": "slower", "timed_out": [1, 5, 0]}]}), "baseline.commands[0].timed_out is not four counts"),
    ("timed out, as written", export(result(), processkit={"format": "processkit-bench/2"}, baseline={"file": "b", "metric": "wall", "commands": [{"command": "a", "verdict": "slower", "timed_out": [1, 5, 0, 5]}]}), None),
    ("20,001 commands", export(*[{"command": "c", "times": []}] * 20_001), "holds 20001 commands"),
    ("deep nesting", '{"results": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested more than 64 deep"),
    ("deep nesting, pretty", '{\n "results": [\n' + "[" * 100_000 + "]" * 100_000 + "]}", "nested more than 64 deep"),
    ("truncated", export(result())[:-20], "is not JSON"),
    ("not UTF-8", export(result()).replace('"a"', '"\udcff"'), "is not UTF-8"),
]  # fmt: skip


@pytest.mark.parametrize("text, named", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_a_crafted_export_is_drawn_or_refused_clearly(tmp_path, text, named):
    crafted, page = tmp_path / "crafted.json", tmp_path / "page.html"
    crafted.write_bytes(text.encode("utf-8", "surrogateescape"))
    done = run_cli("report", crafted, "-o", page)
    stderr = done.stderr.decode("utf-8", "replace")
    if named is None:
        assert done.returncode == 0, stderr
        assert page.stat().st_size > 0 and "<script>" not in page.read_text()
        return
    assert done.returncode == 114, stderr
    assert not page.exists()
    line = stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert str(crafted) in line and named in line, line
    assert len(line) < 600  # a 4,000-digit value is named by its size, never echoed


def test_a_ten_megabyte_times_array_is_drawn_in_bounded_memory(tmp_path):
    """850,000 runs (10 MB): drawn as a sample, within an address-space limit the old reader (every
    run a circle, 4.6 GB) could not stay in."""
    crafted, page = tmp_path / "huge.json", tmp_path / "page.html"
    times = [0.001 + (i % 997) * 1e-6 for i in range(850_000)]
    crafted.write_text(
        export(result(times=times, exit_codes=None), result(command="b", times=times[:1000], exit_codes=None))
    )
    assert crafted.stat().st_size > 10_000_000

    def limit():  # the page of a 10 MB export in less than 1 GiB of address space
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    done = run_cli("report", crafted, "-o", page, preexec_fn=limit, timeout=300)
    assert done.returncode == 0, done.stderr
    html = page.read_text()
    assert html.count('class="run') <= 2 * 420 and "of its 850000 runs drawn" in html
    assert '<td class="num">850000</td>' in html  # the table counts every run


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)  # fmt: skip
FIELDS = [
    *GOOD,
    "name",
    "text",
    "order",
    "user_times",
    "system_times",
    "warmup_times",
    "memory_usage_byte",
    "timed_out",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(FIELDS), value=JSON_VALUES, ours=st.booleans())
def test_any_value_in_any_field_is_drawn_or_a_clear_refusal(field, value, ours):
    from processkit.benchmark.recorded import from_json
    from processkit.errors import Failure, Kind
    from processkit.report.bench_page import bench_page

    top = {"results": [result(**{field: value}), result(command="b")]}
    if ours:
        top["processkit"] = {"format": "processkit-bench/1", "order": "interleaved", "metric": "wall"}
    try:
        bench = from_json(json.loads(json.dumps(top)), "crafted.json")
    except Failure as failure:
        assert failure.kind is Kind.EVENTS_INVALID and failure.message.startswith("crafted.json ")
        return
    assert "<html" in bench_page(bench)
