"""A stop signal to a ``--dask-scheduler`` batch while its client is still connecting (a scheduler
slow to answer, or an address whose listener takes the connection and never speaks, which Dask
waits on past its connect timeout): the batch's stop before any job, as in a wait for its input,
107 for SIGTERM or SIGHUP (a CI runner's cancel), death by SIGINT for Ctrl-C, one closing line.
The client once died by SIGTERM's or SIGHUP's default (143, 129: no line at all) and ended 107
without a word at Ctrl-C. The real ``processkit-cli``; a listening socket of the test's own
stands for the silent scheduler, its ``accept`` the sign that the client is in its wait."""

from __future__ import annotations

import signal
import socket

import pytest

from conftest import SAFETY_NET, start_cli, wait_for_file

pytest.importorskip("distributed")
CANCELLED = 107


@pytest.mark.parametrize(
    ("number", "named", "code"),
    [(signal.SIGTERM, "SIGTERM", CANCELLED), (signal.SIGHUP, "SIGHUP", CANCELLED), (signal.SIGINT, "Ctrl-C", -2)],
)
def test_a_stop_while_the_client_connects_is_the_batchs_stop(tmp_path, number, named, code):
    out = tmp_path / "out"
    with socket.create_server(("127.0.0.1", 0)) as listener:
        address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
        batch = start_cli(
            "batch", "--out", out, "--dask-scheduler", address, "--", "true", ":::", "a", cwd=tmp_path,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a run with Ctrl-C ignored passes that on
        )  # fmt: skip
        try:
            listener.settimeout(SAFETY_NET)
            connection, _ = listener.accept()  # the client is in its wait for the scheduler's answer
            with connection:
                batch.send_signal(number)
                _, err = batch.communicate(timeout=SAFETY_NET)
        finally:
            batch.kill()
    said = err.decode()
    assert batch.returncode == code, said
    assert said.endswith(f"batch: no job started, cancelled by {named} (its Dask tasks not sent yet)\n"), said
    assert not out.exists()


# ``worker_settings``, between the client's set-up and its tasks sent, held until ``go`` is there.
HELD = (
    "(lambda made, mark, go: lambda settings, out: (open(mark, 'w').close(),"
    " [__import__('time').sleep(0.05) for _ in iter(lambda: __import__('os').path.exists(go), True)],"
    " made(settings, out))[2])"
    "(importlib.import_module('processkit.batching.fleet').worker_settings, {mark!r}, {go!r})"
)


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_after_the_set_up_before_the_tasks_are_sent_is_the_batchs_stop(tmp_path, number):
    """Once connected, Dask's loop thread (its signal mask empty) took a stop sent before the
    client's own handlers were in, at its default: the client died (-15, -1) without a word."""
    from local_cluster import local_cluster

    out, mark, go = tmp_path / "out", tmp_path / "set-up", tmp_path / "go"
    with local_cluster(n_workers=1, processes=True) as cluster:
        batch = start_cli(
            "batch", "--out", out, "--dask-scheduler", cluster.scheduler_address, "--", "true", ":::", "a",
            patched=("processkit.batching.fleet", "worker_settings", HELD.format(mark=str(mark), go=str(go))),
            cwd=tmp_path,
        )  # fmt: skip
        try:
            wait_for_file(mark)
            batch.send_signal(number)
            go.touch()
            _, err = batch.communicate(timeout=SAFETY_NET)
        finally:
            batch.kill()
    said = err.decode()
    assert batch.returncode == CANCELLED, said
