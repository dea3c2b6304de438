"""Where a benchmark's commands write, as ``processkit-cli bench`` wires it for a session
(issue 49): ``--output=pipe`` (the default) is hyperfine's pipe, stdout read through a pipe and
discarded, stderr on /dev/null; the pipe is the session's, one for every run, read while runs
go on, so a command writing more than a pipe holds still finishes."""

from __future__ import annotations

import json

from conftest import run_cli

WIRING = 'o=$(readlink /proc/$$/fd/1); e=$(readlink /proc/$$/fd/2); echo "$o $e" >> {log}; head -c 1048576 /dev/zero'


def _bench(tmp_path, *args):
    out = tmp_path / "bench.json"
    done = run_cli("bench", "--style", "none", "--export-json", out, *args, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def test_pipe_is_one_pipe_for_the_session_and_stderr_is_null_as_hyperfines(tmp_path):
    log = tmp_path / "log"
    exported = _bench(tmp_path, "--runs", "3", "--warmup", "1", WIRING.format(log=log))
    lines = log.read_text().split()
    assert len(lines) == 8, lines  # a warm-up and three timed runs, stdout then stderr each
    stdouts, stderrs = lines[0::2], lines[1::2]
    assert stdouts[0].startswith("pipe:[") and set(stdouts) == {stdouts[0]}, stdouts  # the same pipe each run
    assert stderrs == ["/dev/null"] * 4, stderrs
    assert len(exported["results"][0]["times"]) == 3  # 1 MiB a run, more than a pipe holds: drained


def test_the_sessions_pipe_is_also_each_commands_with_several(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    _bench(tmp_path, "--runs", "2", WIRING.format(log=first), WIRING.format(log=second))
    seen = first.read_text().split() + second.read_text().split()
    assert len(set(seen[0::2])) == 1 and set(seen[1::2]) == {"/dev/null"}, seen


def test_the_untimed_steps_write_where_the_pipe_runs_do_unless_shown(tmp_path):
    steps = tmp_path / "steps"
    runs = tmp_path / "runs"
    wired = 'o=$(readlink /proc/$$/fd/1); e=$(readlink /proc/$$/fd/2); echo "$o $e" >> {log}'
    _bench(tmp_path, "--runs", "2", "--prepare", wired.format(log=steps), "--conclude", wired.format(log=steps),
           wired.format(log=runs))  # fmt: skip
    seen = steps.read_text().split()
    assert len(seen) == 8 and set(seen[1::2]) == {"/dev/null"}, seen  # a prepare and a conclude a run
    assert set(seen[0::2]) == set(runs.read_text().split()[0::2]), seen  # the runs' own pipe
