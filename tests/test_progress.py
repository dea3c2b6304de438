"""``batch``'s bar and ``bench``'s lines are drawn by one module (``processkit.progress``): the
same bar for the same share done, the same erasing, and nothing but the lines off a terminal."""

from __future__ import annotations

import os

from conftest import run_cli
from test_batch import on_a_terminal


def test_batch_and_bench_draw_the_same_bar_half_way(tmp_path):
    """Half done is one bar, whichever command draws it (bench's once had blanks for batch's dots)."""
    from processkit.progress import bar

    half = bar(1, 2)
    assert half == "[" + "#" * 15 + "." * 15 + "]"
    batch = on_a_terminal(tmp_path, [{"args": ["true"], "id": f"j{n}"} for n in range(2)], "--jobs", "1")
    assert f"\n{half} 1/2 ok 1 failed 0 " in batch, batch
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
    import re

    from test_batch import write_manifest

    marker = tmp_path / "marker"
    again = ["sh", "-c", f"test -e '{marker}'"]
    jobs = [{"args": ["true"] if n % 2 else again, "id": f"j{n}"} for n in range(6)]
    first = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", str(tmp_path / "out"))
    assert first.returncode == 117, first.stderr  # some job failed
    marker.touch()
    text = on_a_terminal(tmp_path, jobs, "--jobs", "1", "--resume")
    frames = [(int(done), int(total)) for done, total in re.findall(r"\] (\d+)/(\d+) ok ", text)]
    assert frames and {total for _, total in frames} == {6}, frames
    assert [done for done, _ in frames] == sorted(done for done, _ in frames), frames
    assert "[" + "#" * 30 + "] 6/6 ok 3 failed 0" in text, text


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
    assert "] 4/4 ok 0 failed 0 cancelled 2 not started 2 ETA 0s" in text, text
    assert text.rstrip().endswith("0 of 4 jobs exited 0, 2 cancelled, 2 not started, cancelled by Ctrl-C"), text
