"""A run whose tree's CPU time no counter measured (null: a process-group run whose runner
collected a child of no group of its meanwhile, ``accounting.ChildrenUsage``; a counter's read
error) stays unmeasured in ``bench``: never a 0 that the statistics, the exports and the gate take
as a figure. Its ``user`` and ``system`` (hyperfine's: the root's rusage) are measured all the same."""

from __future__ import annotations

import json

import pytest
from types import SimpleNamespace

from processkit.benchmark import gate, recorded
from processkit.benchmark.driver import Measured
from processkit.benchmark.measured import measured_from
from processkit.benchmark.plan import Command, Options
from processkit.benchmark.session import Session
from processkit.containment.accounting import Usage

MS = 1_000_000


def test_a_null_cpu_figure_is_no_zero():
    outcome = SimpleNamespace(
        usage=Usage(peak_memory_bytes=4096),  # CPU null: not accounted for
        command_from_ns=None,
        started_ns=0,
        ended_ns=5 * MS,
        failure=None,
        code=0,
        signal=None,
        max_rss_bytes=None,
        root_cpu_ns=(3 * MS, MS),  # the root's, from its reaping
        cpu_wait_ns=None,  # no wait for a CPU read (the engine's path)
    )
    measured = measured_from(outcome)  # type: ignore[arg-type]
    assert (measured.tree_cpu_ns, measured.wall_ns) == (None, 5 * MS)
    assert (measured.user_ns, measured.system_ns) == (3 * MS, MS)
    outcome.root_cpu_ns = None  # a root never reaped: no rusage either
    assert (measured_from(outcome).user_ns, measured_from(outcome).system_ns) == (None, None)  # type: ignore[arg-type]


class Executor:
    """Each run 10 ms of wall time, 5 ms of the root's CPU time and 6 ms of the tree's, but
    ``unmeasured``'s runs by number, whose tree's CPU no counter gave."""

    def __init__(self, unmeasured: set[int]):
        self.unmeasured, self.runs, self.now = unmeasured, 0, 0.0

    def clock(self) -> float:
        return self.now

    def measure(self, argv, jsonl, iteration, output):
        self.now += 0.01
        self.runs += 1
        tree = None if self.runs in self.unmeasured else 6 * MS
        return Measured(10 * MS, 4 * MS, MS, 4096, 0, tree_cpu_ns=tree)

    def close(self) -> None:
        pass


def bench(unmeasured: set[int]):
    command = Command("a", "a", ("a",), {})
    return Session([command], Options(runs=4), executor=Executor(unmeasured)).run()


def test_a_command_with_a_run_unmeasured_has_no_cpu_figure_and_the_gate_no_verdict_by_it():
    result = bench({2})
    (command,) = result.results
    assert command.cpu_times == [] and command.cpu_summary is None
    record = result.to_json()["results"][0]
    assert record["cpu_times"][1] is None and record["cpu"] is None
    assert record["user"] == 0.004 and record["user_times"][1] == 0.004  # the root's, measured all the same
    earlier = recorded.from_json(bench(set()).to_json(), "base.json")
    assert earlier.commands[0].cpu_times is not None
    # the baseline read back from an export holding a null keeps that run unmeasured too
    assert recorded.from_json(result.to_json(), "new.json").commands[0].cpu_times is None
    result.metric = "cpu"
    (decision,) = gate.decide(result, earlier, 5.0, "--fail-if-slower", "--runs {}".format)
    assert decision.outcome == gate.INCONCLUSIVE and decision.figure == "cpu", decision


class ByCommand(Executor):
    """Each command's runs: (wall ns, the tree's CPU ns or None: unmeasured, and the root's user
    and system ns, 1 ms and 0 unless given), by its argv's first word."""

    def __init__(self, figures: dict):
        super().__init__(set())
        self.figures = figures

    def measure(self, argv, jsonl, iteration, output):
        figures = self.figures[argv[0]]
        (wall, cpu), (user, system) = figures[:2], figures[2:] or (MS, 0)
        self.now += wall / 1e9
        return Measured(wall, user, system, 4096, 0, tree_cpu_ns=cpu)


def bench_of(figures: dict, metric: str = "wall"):
    commands = [Command(name, name, (name,), {}) for name in figures]
    result = Session(commands, Options(runs=10), executor=ByCommand(figures)).run()
    result.metric = metric
    return result


def test_a_baseline_command_with_cpu_unmeasured_is_inconclusive_by_cpu_not_judged_by_wall_time():
    """``--metric cpu``: the baseline's ``b`` has no CPU time; ``a`` (0.3 s asleep then) now burns
    0.1 s of CPU: judged by CPU time, a regression, never passed because its wall time shrank."""
    earlier = recorded.from_json(bench_of({"a": (300 * MS, MS), "b": (50 * MS, None)}).to_json(), "base.json")
    assert earlier.metric_for("cpu") == "cpu"
    now = bench_of({"a": (100 * MS, 100 * MS), "b": (50 * MS, MS)}, "cpu")
    a, b = gate.decide(now, earlier, 5.0, "--fail-if-slower", "--runs {}".format)
    assert (a.figure, a.outcome) == ("cpu", gate.REGRESSED), a
    assert (b.figure, b.outcome) == ("cpu", gate.INCONCLUSIVE) and "the baseline" in b.reason, b


def test_a_hyperfine_baseline_is_still_compared_by_wall_time():
    """No CPU time per run in hyperfine's export: ``--metric cpu`` falls back to wall time, as documented."""
    record = bench_of({"a": (300 * MS, MS)}).to_json()
    for command in record["results"]:
        for ours in ("user_times", "system_times", "cpu_times", "cpu"):
            del command[ours]
    del record["processkit"]
    earlier = recorded.from_json(record, "hyperfine.json")
    assert earlier.origin == recorded.ORIGIN_HYPERFINE and earlier.metric_for("cpu") == "wall"
    (a,) = gate.decide(
        bench_of({"a": (100 * MS, 100 * MS)}, "cpu"), earlier, 5.0, "--fail-if-slower", "--runs {}".format
    )
    assert (a.figure, a.outcome) == ("wall", gate.PASSED), a


# Leaves a process of a session of its own (setsid), then waits until it has exited (a zombie
# the runner collects as the root ends, or already collected): the runner's counter took in a child of no group of
# the run's while the run was open, so the run's CPU is unmeasured.
ESCAPE = """
sh -c 'setsid sh -c "echo \\$\\$ > $0.part; exec mv $0.part $0" &' "$1"
while [ ! -e "$1" ]; do sleep 0.01; done
read escaped < "$1"; rm "$1"
while [ "$(cut -d' ' -f3 /proc/$escaped/stat 2>/dev/null || echo Z)" != Z ]; do sleep 0.01; done
"""


def test_a_command_no_run_of_which_had_its_cpu_measured_says_so_in_every_export(tmp_path, monkeypatch):
    from conftest import run_cli
    from test_accounting_shared import bare

    bare(monkeypatch, tmp_path)
    script = tmp_path / "escape.sh"
    script.write_text(ESCAPE)
    exported, table = tmp_path / "b.json", tmp_path / "b.csv"
    command = f"sh {script} {tmp_path / 'pid'}"
    result = run_cli("bench", "-r", "3", "-N", "--export-json", exported, "--export-csv", table, command, timeout=60)
    assert result.returncode == 0, result.stderr
    (record,) = json.loads(exported.read_text())["results"]
    assert record["cpu_times"] == [None] * 3 and record["cpu"] is None, record
    assert None not in record["user_times"] and record["user"] is not None, record  # the root's rusage
    header, row = table.read_text().splitlines()
    assert header.split(",")[4:6] == ["user", "system"] and "" not in row.split(",")[4:6], row
    assert b"CPU:                 not measured" in result.stdout and b"[User: " in result.stdout


def test_the_shell_start_up_whose_cpu_no_run_measured_is_null_in_the_export():
    """``processkit.shell_startup``: its ``cpu`` is null where no calibration run's tree CPU was
    measured (never 0.0, a figure), and nothing is taken off the runs' own tree CPU."""
    command = Command("a", "a", ("a",), {}, shell=True)
    result = Session(
        [command], Options(runs=2, shell=("sh",)), executor=ByCommand({"sh": (MS, None), "a": (10 * MS, 4 * MS)})
    ).run()
    startup = result.to_json()["processkit"]["shell_startup"]
    assert (startup["cpu"], startup["user"], startup["runs"]) == (None, 0.001, 50), startup
    assert result.results[0].cpu_times == [pytest.approx(0.004)] * 2
    # the root's user and system less the shell's, as hyperfine takes them off: 1 ms less 1 ms
    record = result.to_json()["results"][0]
    assert (record["user_times"], record["system_times"]) == ([0.0, 0.0], [0.0, 0.0]), record


def test_the_shells_user_and_system_are_taken_off_a_shell_commands_at_0_at_least():
    """A command whose root used less user time than the shell's start-up's mean is at 0 (never
    below), its system time the shell's less: hyperfine's subtraction of the two."""
    command = Command("a", "a", ("a",), {}, shell=True)
    figures = {"sh": (MS, None, 3 * MS, MS), "a": (10 * MS, 4 * MS, MS, 4 * MS)}
    result = Session([command], Options(runs=2, shell=("sh",)), executor=ByCommand(figures)).run()
    record = result.to_json()["results"][0]
    assert record["user_times"] == [0.0, 0.0] and record["user"] == 0.0, record
    assert record["system_times"] == [pytest.approx(0.003)] * 2, record
    assert record["cpu_times"] == [pytest.approx(0.004)] * 2, record  # no start-up CPU measured: none off


def against_of(earlier_figures: dict, now_figures: dict, text: str | None = None):
    """The baseline comparison of ``now_figures`` against an export of ``earlier_figures`` by CPU
    time, as ``bench --baseline`` attaches it (every command's text ``text`` where given)."""
    from processkit.benchmark import against

    def bench_with(figures: dict):
        commands = [Command(name, text or name, (name,), {}) for name in figures]
        return Session(commands, Options(runs=5, metric="cpu"), executor=ByCommand(figures)).run()

    earlier = recorded.from_json(bench_with(earlier_figures).to_json(), "base.json")
    now = bench_with(now_figures)
    against.attach(now, earlier, "base.json", None, None)  # type: ignore[arg-type]
    return now, earlier


def test_a_command_whose_cpu_is_unmeasured_on_a_side_is_paired_and_said_so_not_unmatched():
    """``b`` is in the baseline, its CPU time null there: it is paired with it and its verdict
    names the side, never "not in the baseline" while the gate says "not measured"."""
    from processkit.benchmark import baseline
    from processkit.report.bench_page import page_model

    now, earlier = against_of({"a": (10 * MS, MS), "b": (20 * MS, None)}, {"a": (10 * MS, MS), "b": (20 * MS, MS)})
    by = {entry["command"]: entry for entry in now.to_json()["baseline"]["commands"]}
    assert by["b"]["baseline_command"] == "b" and by["b"]["verdict"] == "CPU time not measured in the baseline", by
    assert by["b"]["ratio"] is None and by["a"]["verdict"] != baseline.UNMATCHED, by
    shown = "\n".join(baseline.render(now.baseline))
    assert "not in the baseline" not in shown and "'b': CPU time not measured in the baseline" in shown, shown
    # the other way round (this side's CPU null), and ``report base.json new.json``'s page
    now, earlier = against_of({"a": (10 * MS, MS), "b": (20 * MS, MS)}, {"a": (10 * MS, MS), "b": (20 * MS, None)})
    (b,) = [entry for entry in now.baseline.commands if entry.command == "b"]
    assert (b.baseline_command, b.verdict) == ("b", "CPU time not measured in these runs"), b
    page = page_model(recorded.from_json(now.to_json(), "new.json"), earlier)
    rows = {row["command"]: row for row in page["against"]["rows"]}
    assert (rows["b"]["baseline_command"], rows["b"]["verdict"]) == ("b", "CPU time not measured in these runs"), rows


def test_a_command_whose_cpu_is_unmeasured_in_the_baseline_is_never_compared_with_another_of_the_same_text():
    """``-n a 'sleep 0.01' -n b 'sleep 0.01'``, ``b``'s CPU null in the baseline and ``a``'s in these
    runs: the new ``b`` is paired with the baseline's ``b`` (by name), never with ``a`` by their
    common text (a ratio against another command's CPU time, with nothing naming it)."""
    now, _ = against_of(
        {"a": (10 * MS, MS), "b": (10 * MS, None)}, {"a": (10 * MS, None), "b": (10 * MS, 3 * MS)}, "sleep 0.01"
    )
    by = {entry.command: entry for entry in now.baseline.commands}
    assert by["b"].baseline_command == "b" and by["b"].ratio is None, by["b"]
    assert (by["a"].baseline_command, by["a"].verdict) == ("a", "CPU time not measured in these runs"), by["a"]
    assert by["b"].verdict == "CPU time not measured in the baseline", by["b"]


def test_report_says_which_commands_the_cpu_comparison_left_out(tmp_path):
    """``report NEW.json`` and ``report OLD.json NEW.json`` by CPU time: a command none of whose runs
    had its CPU time measured has no place in the comparison; the page names it instead of
    dropping it unseen (it read only the others, as if the benchmark had no such command)."""
    from conftest import run_cli

    exported = tmp_path / "b.json"
    done = run_cli("bench", "-N", "--runs", "3", "--metric", "cpu", "--export-json", exported,
                   "true", "sleep 0.01", "sleep 0.02", timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(exported.read_text())
    unmeasured = data["results"][2]
    unmeasured.update(cpu=None, cpu_times=[None] * 3)
    data["comparison"]["others"] = data["comparison"]["others"][:1]
    new = tmp_path / "new.json"
    new.write_text(json.dumps(data))
    for inputs in ((new,), (exported, new)):
        page = tmp_path / "page.html"
        done = run_cli("report", *inputs, "-o", page)
        assert done.returncode == 0, done.stderr
        text = page.read_text()
        assert '<span class="mono">sleep 0.02</span>: not compared, its CPU time was not measured' in text, inputs
        assert (
            done.stderr
            == b"processkit-cli: note: not compared by CPU time, as none of their runs measured it: sleep 0.02\n"
        )
    data["results"][1].update(cpu=None, cpu_times=[None] * 3)
    data["comparison"] = None
    new.write_text(json.dumps(data))
    done = run_cli("report", new, "-o", page)
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert "fewer than two commands had it measured" in text
    assert all(f'<span class="mono">{name}</span>: not compared' in text for name in ("sleep 0.01", "sleep 0.02"))
