"""A run with a large tree and a short ``snapshot_interval`` shares the runner service's loop with
every other run of the process: its samples were taken on every turn of that loop (each due again
at once), so another thread's ``run(["true"])``, served a turn at a time, waited for a sample on each
of its turns (0.3-0.7 s with 1500 members where it takes milliseconds). The next sample is now due
no sooner than four times the last one's cost after it ended, and the loop serves other runs in
between: counted here as the samples the heavy run's stream gained during each of another run's
calls (one per turn before: a median of 3-4 a call with these 300 members, at 15 calls; 0-1 now),
a count that a loaded machine slows on both sides alike, where a time would not be. Counted at 9
calls against a bound of 4, it passed with the cadence's pay-back undone (``race.PAID_BACK = 0``)."""

from __future__ import annotations

import json
import statistics
import subprocess

import processkit
from streams import wait_until

MEMBERS = 300
CALLS = 15
MOST_PER_CALL = 2  # the median call's share: a sample on each of its turns came to 3-4 (load 12-19)


def samples(jsonl) -> list[dict]:
    """The heavy run's ``members_snapshot`` events written so far (whole lines only)."""
    lines = jsonl.read_bytes().split(b"\n")[:-1]
    return [event for line in lines if (event := json.loads(line))["event"] == "members_snapshot"]


def test_a_heavy_snapshot_cadence_leaves_other_runs_their_turns(tmp_path):
    jsonl = tmp_path / "heavy.jsonl"
    tree = f"i=0; while [ $i -lt {MEMBERS} ]; do sleep 120 & i=$((i + 1)); done; echo up; read line"
    with processkit.start(
        ["sh", "-c", tree], snapshot_interval="1ms", stdin=subprocess.PIPE, stdout=subprocess.PIPE, jsonl=str(jsonl)
    ) as heavy:
        assert heavy.stdout.readline() == b"up\n"
        wait_until(
            lambda: any(len(event["members"]) > MEMBERS for event in samples(jsonl)), what="a whole tree's sample"
        )
        during = []
        for _ in range(CALLS):
            before = len(samples(jsonl))
            assert processkit.run(["true"]).returncode == 0
            during.append(len(samples(jsonl)) - before)
        went_on = len(samples(jsonl)) + 2  # the cadence still samples the tree: the counts are not its end's
        wait_until(lambda: len(samples(jsonl)) >= went_on, what="two more samples")
        heavy.kill()
        heavy.wait()
    assert statistics.median(during) <= MOST_PER_CALL, f"samples taken during each other run: {sorted(during)}"
