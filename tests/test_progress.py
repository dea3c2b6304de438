"""``batch``'s bar and ``bench``'s lines are drawn by one module (``processkit.progress``): the
same bar for the same share done, the same erasing, and nothing but the lines off a terminal."""

from __future__ import annotations

import os
import re

from conftest import run_cli
from test_batch import batch_on_a_terminal, on_a_terminal, write_manifest


def test_batch_and_bench_draw_the_same_bar_half_way(tmp_path):
    """Half done is one bar, whichever command draws it (bench's once had blanks for batch's dots)."""
    from processkit.progress import bar

    half = bar(1, 2)
    assert half == "[" + "#" * 15 + "." * 15 + "]"
    batch = on_a_terminal(tmp_path, [{"args": ["true"], "id": f"j{n}"} for n in range(2)], "--jobs", "1")
    assert f"\n{half} 1/2: 1 exited 0, 0 failed, " in batch, batch
    bench = run_cli("bench", "--runs", "2", "--style", "full", "-N", "true", cwd=tmp_path)
    assert bench.returncode == 0, bench.stderr
    assert f" {half}   1/2 mean ".encode() in bench.stdout, bench.stdout
    assert b"\r\x1b[K" in bench.stdout and b"\x1b[2K" not in bench.stdout


def test_a_jobs_shown_output_goes_below_its_line_not_after_the_bar(tmp_path):
    """``--show-output`` on a terminal: the bar is taken away before a job's captured stderr is
    copied, and drawn again after it (the stderr once followed the bar on its row)."""
    job = {"args": ["sh", "-c", "echo oops >&2"], "id": "loud"}
    text = on_a_terminal(tmp_path, [job], "--show-output")
    assert " ms\r\noops\r\n\r\x1b[K[" in text, text
    assert "ETA 0soops" not in text


def test_off_a_terminal_only_the_lines_are_written():
    from processkit.progress import LiveLines

    read_end, write_end = os.pipe()
    live = LiveLines(write_end, draw=False)
    live.show(["[....] 0/1"])
    live.above("batch: one\n", ["[####] 1/1"])
    live.clear()
    live.above("batch: 1 of 1 job exited 0")
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        assert pipe.read() == b"batch: one\nbatch: 1 of 1 job exited 0\n"


def test_a_resumed_batchs_bar_only_rises_and_ends_full(tmp_path):
    """``--resume``: the jobs skipped as passed before count as done over the whole manifest
    (the total once shrank as they were met: 0/6, 1/6, 2/5, 3/4, ending at 75 %)."""

    marker = tmp_path / "marker"
    again = ["sh", "-c", f"test -e '{marker}'"]
    jobs = [{"args": ["true"] if n % 2 else again, "id": f"j{n}"} for n in range(6)]
    first = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", str(tmp_path / "out"))
    assert first.returncode == 117, first.stderr  # some job failed
    marker.touch()
    text = on_a_terminal(tmp_path, jobs, "--jobs", "1", "--resume")
    frames = [(int(done), int(total)) for done, total in re.findall(r"\] (\d+)/(\d+): ", text)]
    assert frames and {total for _, total in frames} == {6}, frames
    assert [done for done, _ in frames] == sorted(done for done, _ in frames), frames
    assert "[" + "#" * 30 + "] 6/6: 3 exited 0, 0 failed" in text, text


def test_after_ctrl_c_the_bars_counts_add_up_to_its_total(tmp_path):
    """A user's ``batch -j 2 -- sh -c 'sleep 30' ::: a b c d`` and Ctrl-C read ``4/4 ok 0 failed 0``:
    the cancelled and never started jobs were in the total but named nowhere. Now each is, in the
    closing line's words."""
    import pty
    import signal
    import subprocess

    from conftest import SAFETY_NET, cli_command, wait_for_event
    from streams import read_to_the_end

    out = tmp_path / "out"
    controller, terminal = pty.openpty()
    argv = [*cli_command(), "batch", "-j", "2", "--out", str(out), "--", "sh", "-c", "sleep 30", ":::", "a", "b", "c"]
    batch = subprocess.Popen(
        [*argv, "d"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=terminal, start_new_session=True
    )
    os.close(terminal)
    try:
        for job in ("a", "b"):
            wait_for_event(out / job / "events.jsonl", "run_started")
        os.killpg(batch.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole foreground group
        data = read_to_the_end(controller)
    finally:
        os.close(controller)
        if batch.poll() is None:
            os.killpg(batch.pid, signal.SIGKILL)
        batch.wait(timeout=SAFETY_NET)
    text = data.decode()
    assert "] 4/4: 0 exited 0, 0 failed, 2 cancelled, 2 not started, ETA 0s" in text, text
    assert text.rstrip().endswith("0 of 4 jobs exited 0, 2 cancelled, 2 not started, cancelled by Ctrl-C"), text


def test_the_bar_names_a_timeout_and_a_skipped_need_in_the_closing_lines_words(tmp_path):
    """The bar's ``timed out`` and ``skipped`` counts (no test had them), beside its ``exited 0``:
    the closing line's word for a job that passed, where the bar once said ``ok``."""
    jobs = [
        {"args": ["true"], "id": "fine"},
        {"args": ["false"], "id": "bad"},
        {"args": ["sleep", "30"], "id": "slow", "timeout": "300ms"},
        {"args": ["true"], "id": "after", "needs": ["bad"]},
    ]
    manifest = write_manifest(tmp_path / "m.jsonl", jobs)
    text = batch_on_a_terminal(manifest, "--out", str(tmp_path / "out"), exit_code=117)  # a job did not exit 0
    bar = "[" + "#" * 30 + "] 4/4: 1 exited 0, 1 failed, 1 timed out, 1 skipped, ETA 0s"
    assert bar in text, text
    assert "1 of 4 jobs exited 0, 1 failed, 1 timed out, 1 skipped" in text, text
    assert " ok " not in text, text


def test_the_bar_names_a_lost_dask_task_as_the_closing_line_does():
    """``task failed``, the one count a process here cannot make without a Dask cluster: the bar's
    words for a tally holding one, in the closing line's order."""
    from types import SimpleNamespace

    from processkit.cli.batch_progress import _counted

    kinds = ("failed", "timed_out", "cancelled", "task_failed", "not_started", "need_failed", "skipped")
    tally = SimpleNamespace(**{kind: 0 for kind in kinds})
    tally.task_failed = 2
    assert _counted(tally) == ", 0 failed, 2 task failed"


def test_a_warning_at_the_batchs_end_takes_the_bars_place_not_the_end_of_its_row(tmp_path):
    """An ``--out`` holding an earlier batch's job directory is warned of as the batch ends, while
    the bar is still drawn: the warning once followed ``ETA 0s`` on the bar's row."""
    (tmp_path / "out" / "stale").mkdir(parents=True)
    text = on_a_terminal(tmp_path, [{"args": ["true"], "id": "j0"}])
    assert "ETA 0sprocesskit-cli" not in text, text
    assert "\r\x1b[Kprocesskit-cli: warning: " in text and "(stale)" in text, text


def test_a_warning_while_the_jobs_run_takes_the_bars_place_too(tmp_path):
    """``--id`` with no replacement string is warned of as the second job is made, the bar drawn
    below the first job's line: the warning once followed ``ETA 1s`` on its row."""
    text = batch_on_a_terminal("--out", tmp_path / "out", "-j", "1", "--id", "same", "--", "true", ":::", "a", "b")
    assert "\r\x1b[Kprocesskit-cli: warning: --id 'same' has no replacement string" in text, text
    assert not re.search(r"ETA \d+sprocesskit-cli", text), text
