"""bench reads its values by the run grammar, on the command line and in the API alike.

Counts and durations are ``run``'s (``grammar.values``): ``bench --runs 1_0`` is refused as
``run --max-processes 1_0`` is, not read as 10 by ``int()``. A ``--command`` argv's JSON escapes
follow the text rule (``"\\udc80"`` refused). ``processkit.bench`` takes ``processkit.run``'s
units (seconds, or a duration string), names its keywords in its errors, and refuses an unknown
keyword naming it. Process-level through ``processkit-cli``; the API is called for real.
"""

from __future__ import annotations

import os
import warnings

import pytest

import processkit
from conftest import run_cli
from processkit.benchmark import options
from processkit.errors import Failure
from processkit.grammar import FLAGS, KEYWORDS

NOT_COUNTS = ["1_0", "²", "٣", " 3", "3 ", "0x3", "-1"]


@pytest.mark.parametrize("count", NOT_COUNTS)
def test_bench_refuses_a_count_run_refuses(tmp_path, count):
    marker = tmp_path / "ran"
    run = run_cli("run", "--jsonl", tmp_path / "s.jsonl", "--max-processes", count, "--", "true")
    done = run_cli("bench", "--style", "none", "--runs", count, f"touch {marker}")
    assert run.returncode == 100 and done.returncode == 100, done.stderr
    said = done.stderr.decode()
    assert "'--runs'" in said and "expected a whole number" in said and "expected a whole number" in run.stderr.decode()
    assert not marker.exists()


@pytest.mark.parametrize("flag", ["--min-runs", "--max-runs", "--warmup"])
def test_every_count_flag_has_the_one_grammar(flag):
    done = run_cli("bench", "--style", "none", flag, "²", "--", "true")
    assert done.returncode == 100 and f"'{flag}'" in done.stderr.decode(), done.stderr


@pytest.mark.parametrize("flag", ["--min-time", "--timeout"])
def test_durations_have_runs_grammar(flag):
    done = run_cli("bench", "--style", "none", flag, "1_0", "--", "true")
    assert done.returncode == 100 and "optional unit ms, s, m or h" in done.stderr.decode(), done.stderr


@pytest.mark.parametrize("jobs", ["²", "٣", "1_0"])
def test_batch_counts_have_the_one_grammar(tmp_path, jobs):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"id": "a", "args": ["true"]}\n')
    done = run_cli("batch", manifest, "--jobs", jobs, "--out", tmp_path / "out")
    assert done.returncode == 100 and "'--jobs <N>'" in done.stderr.decode(), done.stderr


def test_a_command_argvs_escaped_lone_surrogate_is_refused(tmp_path):
    done = run_cli("bench", "--style", "none", "--runs", "1", "--command", '["echo", "\\udc80"]')
    assert done.returncode == 100 and "lone surrogate" in done.stderr.decode(), done.stderr
    done = run_cli("bench", "--style", "none", "--runs", "1", "--command", '["echo", "\\u0000"]')
    assert done.returncode == 100 and "NUL" in done.stderr.decode(), done.stderr


def test_an_undecodable_byte_given_as_it_is_reaches_the_command(tmp_path):
    out = tmp_path / "out"
    command = os.fsdecode(b'["sh", "-c", "printf %s \\"$1\\" > ' + os.fsencode(out) + b'", "sh", "\x80"]')
    done = run_cli("bench", "--style", "none", "--runs", "1", "--command", command)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == b"\x80"


def test_the_api_names_an_unknown_keyword_and_itself():
    with pytest.raises(TypeError) as raised:
        processkit.bench([["true"]], runz=2)
    assert "'runz'" in str(raised.value) and "processkit.bench()" in str(raised.value)
    assert "did you mean 'runs'" in str(raised.value)


@pytest.mark.parametrize(
    "keywords, error, said",
    [
        ({"runs": 0}, ValueError, "'runs='"),
        ({"runs": "1_0"}, ValueError, "'runs='"),
        ({"warmup": "²"}, ValueError, "'warmup='"),
        ({"runs": True}, TypeError, "runs must be an int"),
        ({"timeout": 0}, ValueError, "'timeout='"),
        ({"timeout": "1_0"}, ValueError, "'timeout='"),
        ({"min_time": -1}, ValueError, "'min_time='"),
        ({"min_time": [1]}, TypeError, "min_time must be a number of seconds"),
        ({"min_runs": 5, "max_runs": 3}, ValueError, "'max_runs=' (3) cannot be below 'min_runs=' (5)"),
        ({"reference_name": "r"}, ValueError, "the argument 'reference_name=' requires 'reference='"),
        ({"output": "null", "show_output": True}, ValueError, "'output=' cannot be used with 'show_output='"),
        ({"fail_if_slower": 5}, ValueError, "'fail_if_slower=' requires 'baseline='"),
        ({"cpus": [99999]}, ValueError, "'cpus='"),
        ({"ignore_failure": [256]}, ValueError, "'ignore_failure='"),
        ({"input_file": "/nonexistent/in"}, ValueError, "specified as 'input_file=' does not exist"),
        ({"output": "nul"}, ValueError, "unknown 'output=' 'nul'"),
        ({"output": 3}, TypeError, "output must be"),
        ({"names": ["a", "b"]}, ValueError, "too many names= options: expected 1 at most"),
        ({"parameters": {"v": []}}, ValueError, "the parameter 'v' has no values"),
        ({"shell": "none", "prepare": "echo '"}, ValueError, "cannot split the command"),
        ({"shell": "'"}, ValueError, "cannot read 'shell='"),
        ({"names": ["\udc80"]}, ValueError, "names[0] holds a lone surrogate"),
        ({"prepare": ["echo", "\ud800"]}, ValueError, "prepare[1] holds a lone surrogate"),
    ],
)
def test_the_api_refuses_a_bad_keyword_naming_it_before_anything_runs(tmp_path, keywords, error, said):
    marker = tmp_path / "ran"
    with pytest.raises(error) as raised:
        processkit.bench([["touch", str(marker)]], **keywords)
    assert said in str(raised.value) and "--" not in str(raised.value)
    assert not marker.exists()


def test_a_shell_command_the_command_line_would_take_for_an_option_is_refused_by_the_api():
    with pytest.raises(ValueError, match=r"commands\[0\] starts with '-'"):
        processkit.bench(["--version"], runs=1)


def test_a_command_with_a_lone_surrogate_is_refused_by_the_api():
    with pytest.raises(ValueError, match=r"commands\[1\]\[1\] holds a lone surrogate"):
        processkit.bench([["true"], ["echo", "\udc80"]], runs=1)


def test_the_api_takes_durations_as_processkit_run_does():
    assert processkit.bench([["true"]], runs=1, timeout="10m").settings["timeout_ms"] == 600_000
    assert processkit.bench([["true"]], runs=1, timeout=0.25).settings["timeout_ms"] == 250
    assert processkit.bench([["true"]], runs=1, timeout=2).settings["timeout_ms"] == 2000
    few = processkit.bench([["true"]], min_runs=2, max_runs=3, min_time="0s")
    assert few.results[0].summary.runs == 2  # min_time 0: min_runs decides


def test_the_old_keywords_still_work_with_a_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = processkit.bench([["true"]], runs=1, timeout_ms=1500, min_time_s=0)
    assert result.settings["timeout_ms"] == 1500
    said = sorted(str(warning.message) for warning in caught if warning.category is DeprecationWarning)
    assert len(said) == 2 and "pass min_time=" in said[0] and "pass timeout=" in said[1]
    with pytest.raises(TypeError, match="'timeout' or the deprecated 'timeout_ms'"):
        processkit.bench([["true"]], timeout=1, timeout_ms=1000)


def test_a_failed_benchmark_is_still_the_clis_failure():
    with pytest.raises(Failure) as raised:
        processkit.bench([["false"]], runs=2)
    assert raised.value.code == 118


def test_one_table_names_an_option_as_each_caller_spells_it():
    with pytest.raises(Failure, match="'--max-runs' \\(3\\)"):
        options.read({"min_runs": "5", "max_runs": "3"}, FLAGS)
    with pytest.raises(Failure, match="'max_runs=' \\(3\\)"):
        options.read({"min_runs": 5, "max_runs": 3}, KEYWORDS)
    typed = options.read(
        {"runs": "+3", "min_time": "500ms", "timeout": 0.5, "cpus": "0,2-3", "ignore_failure": ""}, FLAGS
    )
    assert typed == {"runs": 3, "min_time": 500, "timeout": 500, "cpus": (0, 2, 3), "ignore_failure": True}
    assert options.read({"cpus": [3, 0, 3], "ignore_failure": [1, 2]}, KEYWORDS) == {
        "cpus": (0, 3),
        "ignore_failure": (1, 2),
    }


def test_a_session_builds_its_runs_spec_once_through_the_run_grammar(monkeypatch):
    from processkit.benchmark import driver
    from processkit.benchmark.plan import Options
    from processkit.grammar import run as grammar_run

    built = []
    real = grammar_run.build
    monkeypatch.setattr(grammar_run, "build", lambda *args, **kwargs: built.append(args) or real(*args, **kwargs))
    engine = driver.Engine(Options(timeout_ms=1500), ends_descendants=False, lodged=False)
    try:
        runs = [engine.measure(("true",)), engine.measure(("sh", "-c", "exit 3"))]
    finally:
        engine.close()
    assert len(built) == 1 and [run.exit_code for run in runs] == [0, 3]
    options = Options(timeout_ms=1500, input_file=os.devnull)
    spec, _ = driver.run_spec(driver.session_spec(options), ("true",), options, None, "7", "id", (("A", "1"),), "pipe")
    assert (spec.timeout_ms, spec.grace_ms, spec.stdin_file, spec.echo, spec.run_id) == (
        1500,
        0,
        os.devnull,
        False,
        "id",
    )
    given, (name, offset), iteration = spec.env.assignments
    assert spec.env.clear and (given, iteration) == (("A", "1"), ("HYPERFINE_ITERATION", "7"))
    assert name == "HYPERFINE_RANDOMIZED_ENVIRONMENT_OFFSET" and offset == "X" * len(offset) and len(offset) < 4096


@pytest.mark.parametrize("low, high", [("1_0", "1_1"), ("1", "٣"), ("-+1", "3")])
def test_a_parameter_scan_takes_ascii_numbers_only(low, high):
    done = run_cli("bench", "--style", "none", "--runs", "1", "-P", "n", low, high, "-D", "1", "-N", "true {n}")
    assert done.returncode == 100 and "--parameter-scan takes numbers" in done.stderr.decode(), done.stderr
