"""A job's terminal line wrote its duration as the summary's raw milliseconds, so a CI log of a
20-minute pytest shard read ``batch: shard-3: exit 0 in 1203456.789 ms``; it is now written the
one way the batch's page writes one (``985.7 ms``, ``1.052 s``, ``20 min 3 s``)."""

from __future__ import annotations

import json
import re

from conftest import run_cli
from streams import PY


def test_a_jobs_line_says_its_duration_as_the_page_does(tmp_path):
    # a second's sleep: its duration is past 1000 ms, whatever the machine's load
    jobs = [{"id": "long", "args": [PY, "-c", "import time; time.sleep(1.05)"]}, {"id": "quick", "args": ["true"]}]
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    result = run_cli("batch", path, "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    said = result.stderr.decode()
    lines = {
        json.loads(line)["id"]: json.loads(line)
        for line in (tmp_path / "out" / "summary.jsonl").read_text().splitlines()
    }
    seconds = re.search(r"^batch: long: exit 0 in (\d+(?:\.\d{1,3})?) s$", said, re.MULTILINE)
    assert seconds, said
    assert abs(float(seconds.group(1)) * 1000 - lines["long"]["duration_ms"]) < 1
    assert re.search(r"^batch: quick: exit 0 in \d+(\.\d{1,3})? ms$", said, re.MULTILINE), said
