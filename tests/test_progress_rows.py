"""What the batch says beside its progress bar goes on a row of its own: a warning with
``--dask-scheduler`` (whose jobs never turn the batch's own loop), a failure line said mid-run, a
warning from a Dask client's watcher thread; and the route a batch's warnings take ends with the
batch, however it ended. The real ``processkit-cli`` on a terminal (a pty)."""

from __future__ import annotations

import os
import re
import subprocess
import threading

import pytest

from conftest import SAFETY_NET
from streams import read_to_the_end, read_until
from test_batch import start_on_a_terminal


def _on_a_terminal(cwd, *args) -> tuple[subprocess.Popen, int]:
    return start_on_a_terminal(*args, stdin=subprocess.PIPE, cwd=cwd)


def test_a_dask_batchs_warning_takes_the_bars_row_too(tmp_path):
    """The Dask path never attached the batch's loop, so its warnings were never routed: an
    ``--out`` holding an earlier batch's job directory was warned of after ``ETA 0s`` on the bar's
    row."""
    from local_cluster import local_cluster

    (tmp_path / "o3" / "stale").mkdir(parents=True)
    with local_cluster(n_workers=1, threads_per_worker=1, processes=True) as cluster:
        proc, controller = _on_a_terminal(
            tmp_path,
            "--out",
            "o3",
            "--dask-scheduler",
            cluster.scheduler_address,
            "-j",
            "1",
            "--",
            "true",
            ":::",
            "a",
            "b",
        )
        proc.stdin.close()
        text = read_to_the_end(controller).decode()
        os.close(controller)
        assert proc.wait(timeout=SAFETY_NET) == 0, text
    assert "2/2: 2 exited 0, 0 failed" in text, text
    assert not re.search(r"ETA \d+sprocesskit-cli", text), text
    assert "\r\x1b[Kprocesskit-cli: warning: o3 holds 1 job directory" in text, text


def test_a_failure_line_said_mid_run_takes_the_bars_row(tmp_path):
    """A line read from the pipe after the first job ended holds a NUL: the batch fails (100), and
    its line once followed the bar on its row (``1/?: 1 exited 0, 0 failedprocesskit-cli: ...``)."""
    proc, controller = _on_a_terminal(tmp_path, "--out", "o4", "-j", "1", "--", "true", "::::", "-")
    proc.stdin.write(b"a\n")
    proc.stdin.flush()
    seen = read_until(controller, b"1/?: 1 exited 0, 0 failed", "the bar after the first job")
    proc.stdin.write(b"b\0c\n")
    proc.stdin.close()
    text = (seen + read_to_the_end(controller)).decode()
    os.close(controller)
    assert proc.wait(timeout=SAFETY_NET) == 100, text
    assert "failedprocesskit-cli" not in text, text
    assert re.search(r"\r\x1b\[Kprocesskit-cli: job 2: args item \d+ holds a NUL character", text), text


def test_a_warning_from_another_thread_waits_for_the_bar_being_drawn(monkeypatch):
    """A Dask client's no-worker watcher warns from a thread of its own (each 30 s: in this
    process, not a CLI's) while the main thread may be drawing the bar: the warning waits until
    the bar is drawn whole, then takes its row."""
    import pty
    import sys

    from processkit import diagnostics
    from processkit.cli.batch_progress import Progress

    controller, terminal = pty.openpty()
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(sys, "stderr", os.fdopen(terminal, "w", closefd=False))
    try:
        progress = Progress(lambda: 2, "out", False)
        progress.output.route()
        said = threading.Event()
        with progress.output.drawing:  # the main thread mid-draw
            thread = threading.Thread(target=lambda: (diagnostics.warn("from the watcher"), said.set()))
            thread.start()
            assert not said.wait(0.2)  # held until the bar is drawn
            progress._live.show(["[bar] 1/2"])
        thread.join(SAFETY_NET)
        progress.abandon()
        assert diagnostics.route(None) is None  # released: nothing left routed
    finally:
        os.close(terminal)
    os.set_blocking(controller, False)
    text = b""
    try:
        while chunk := os.read(controller, 65536):
            text += chunk
    except OSError:
        pass
    os.close(controller)
    assert b"[bar] 1/2\r\x1b[Kprocesskit-cli: warning: from the watcher\r\n" in text, text


def test_the_route_ends_with_a_batch_whose_reports_fail(tmp_path, monkeypatch):
    """An exception after the jobs ran (the page, the escapees, the reports) skipped the bar's end,
    and the batch's route stayed on its dead live output for the rest of the process."""
    from types import SimpleNamespace

    from processkit import diagnostics
    from processkit.cli import batch, batch_reports

    def failing(*args, **kwargs):
        raise RuntimeError("the reports failed")

    monkeypatch.setattr(batch_reports, "write_reports", failing)
    args = batch.build_parser().parse_args(["--out", str(tmp_path / "out")])
    invocation = SimpleNamespace(error_format="text")
    settings = SimpleNamespace(out=str(tmp_path / "out"), retries=0)

    def ran(args, jobs, settings, progress):  # routed, as the batch's loop is while it turns
        diagnostics.route(progress.output._said)
        return SimpleNamespace(gone=frozenset(), own=None)

    monkeypatch.setattr(batch, "_run", ran)
    monkeypatch.setattr(batch_reports, "check_job_directories", lambda *a: None)
    monkeypatch.setattr("processkit.cli.batch_habits.settle", lambda *a: None)
    with pytest.raises(RuntimeError):
        batch._batch(args, invocation, settings, [object()], None)
    assert diagnostics.route(None) is None
