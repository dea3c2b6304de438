"""``processkit.batch``'s warnings reach its caller: the batch runs in a process whose stderr
nobody reads, so what the CLI's batch prints there (an ``out`` holding an earlier batch's job
directories, a ``resume`` summary keeping jobs this list no longer has) was lost. Each is a
``processkit.BatchWarning`` at the caller's line, before the batch returns or raises."""

from __future__ import annotations

import warnings

import pytest

import processkit


def test_the_batch_s_warnings_reach_the_api_caller_and_a_check_still_raises(tmp_path):
    """An ``out`` an earlier batch wrote: warned at the caller's line. Then a ``resume`` summary
    keeping a job this list no longer has: warned too, and ``check`` still raises."""
    out = str(tmp_path / "out")
    processkit.batch([{"args": ["true"], "id": "old"}], out=out)
    with pytest.warns(processkit.BatchWarning) as said:
        lines = processkit.batch([{"args": ["true"], "id": "new"}, {"args": ["false"], "id": "bad"}], out=out)
    assert sorted(line["id"] for line in lines) == ["bad", "new"]  # in the order they ended
    texts = [str(warning.message) for warning in said]
    assert texts == [
        f"{out} holds 1 job directory an earlier batch wrote that this one did not (old): its files are not this batch's"
    ]
    assert said[0].filename == __file__, "warned at the caller's line"
    with pytest.warns(processkit.BatchWarning, match=r"keeps the lines of 1 job an earlier batch ran .*\(new\)"):
        with pytest.raises(processkit.BatchError):
            processkit.batch([{"args": ["false"], "id": "bad"}], out=out, resume=True, check=True)


def test_a_job_that_left_processes_running_is_warned_and_the_lines_survive_as_an_error(tmp_path):
    """As ``run``'s ``LeftRunning``: a job whose child exited with a process of its tree still
    running (ended by the teardown) was only ``leaked`` in its summary line; one BatchWarning now
    names the jobs, and raised as an error (``-W error``) it holds the summary lines."""
    left = ["sh", "-c", "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo hi"]
    manifest = [{"args": left, "id": "lk"}, {"args": ["true"], "id": "ok"}]
    with pytest.warns(processkit.BatchWarning) as said:
        lines = processkit.batch(manifest, out=str(tmp_path / "out"))
    assert [str(warning.message) for warning in said] == [
        "1 job left processes running when the child exited, ended by the teardown (`leaked` in the summary): lk"
    ]
    assert said[0].filename == __file__ and {line["id"]: line.get("leaked") for line in lines} == {"lk": 1, "ok": None}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(processkit.BatchWarning) as raised:
            processkit.batch(manifest, out=str(tmp_path / "again"))
    assert sorted(line["id"] for line in raised.value.result) == ["lk", "ok"]
