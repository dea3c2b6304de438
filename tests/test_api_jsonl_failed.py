"""A named ``jsonl=`` stream whose writes fail (a full disk: here ``/dev/full``) is said: the API
returned a result with no events, no ``source`` and empty ``diagnostics``, and no warning, where
``processkit-cli run`` warns ``JSONL event logging disabled: could not write a JSONL event: ...``. The
runner service drops its warnings (no reader there), so the failure now travels in the reply."""

from __future__ import annotations

import warnings

import pytest

import processkit


def test_a_jsonl_stream_whose_writes_fail_is_said(tmp_path):
    with pytest.warns(
        processkit.EventsLost,
        match=r"JSONL event logging disabled: could not write a JSONL event: No space left on device \(os error 28\)",
    ) as said:
        result = processkit.run(["sh", "-c", "exit 3"], jsonl="/dev/full")
    assert result.returncode == 3, "the run and its code go on, as the CLI's"
    assert [str(w.message) for w in said if w.category is processkit.EventsLost] == [
        "processkit.run('sh', ...): jsonl=/dev/full: JSONL event logging disabled: could not write a JSONL event: "
        "No space left on device (os error 28); "
        "the result's events are those the stream holds"
    ]
    assert "JSONL event logging disabled: could not write a JSONL event: No space left on device" in result.diagnostics


def test_an_awaited_runs_failed_stream_is_said():
    """Said as ``run_async``'s, at the awaiting line (it named processkit.run, and pointed into
    asyncio)."""
    import asyncio

    async def awaited():
        return await processkit.run_async(["true"], jsonl="/dev/full")

    with pytest.warns(processkit.EventsLost, match="No space left on device") as said:
        result = asyncio.run(awaited())
    assert result.returncode == 0
    [warned] = [w for w in said if w.category is processkit.EventsLost]
    assert str(warned.message).startswith("processkit.run_async('true', ...): jsonl=/dev/full: ")
    assert warned.filename == __file__, warned.filename


def test_start_refuses_a_stream_it_cannot_follow_before_anything_runs(tmp_path):
    """``start`` learns the run's start by following its stream: a device named as ``jsonl=``
    held it until the run's end (``/dev/null``: a ``sleep 3`` returned after 3 s, its Popen
    shape gone) or raised the reader's internal ``WrongKind`` (``/dev/full``)."""
    for device in ("/dev/null", "/dev/full"):
        with pytest.raises(ValueError, match=f"jsonl={device} is a character device: start"):
            processkit.start(["sleep", "30"], jsonl=device)
    assert processkit.run(["true"], jsonl="/dev/null").returncode == 0, "run() reads nothing back live"


def test_start_refuses_a_directory_as_its_stream_before_anything_runs(tmp_path):
    """A directory named as ``jsonl=`` raised the follower's internal ``WrongKind`` ("cannot read
    the events stream ...: it is a directory"), after the run was sent."""
    label = {"directory-stream": str(tmp_path.name)}
    with pytest.raises(ValueError) as refused:
        processkit.start(["sleep", "30"], jsonl=str(tmp_path), labels=label)
    assert type(refused.value) is ValueError
    assert str(refused.value) == (
        f"jsonl={tmp_path} is a directory: start() follows its jsonl= stream to see the run begin; name a "
        "regular file, or none (the events are then handle.events())"
    )
    assert processkit.runs(labels=label) == [], "nothing sent"


def test_a_stream_that_takes_every_event_says_nothing(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # EventsLost among them
        result = processkit.run(["true"], jsonl=str(tmp_path / "run.jsonl"))
    assert result.source == "child_exit" and result.diagnostics == ""
