"""A batch's memory does not grow with its number of jobs (issue 45): the manifest is read again
as the jobs start, nothing of a job that ended is kept, and the loop's heap sheds the timeouts it
cancels. Measured in this process (``tracemalloc``'s peak over a whole batch, manifest read
included) at two sizes: the larger may cost no more per job than a few bytes."""

from __future__ import annotations

import gc
import tracemalloc

from processkit.batching.manifest import read
from processkit.batching.on_host import Settings, run_batch


def _peak(tmp_path, count: int) -> int:
    path = tmp_path / f"m{count}.jsonl"
    path.write_text('{"args": ["true"], "timeout": "1h"}\n' * count)
    gc.collect()
    tracemalloc.start(1)
    try:
        with open(path, "rb") as stream:
            manifest = read(stream, str(path))
            settings = Settings(str(tmp_path / f"out{count}"), 2, keep_failed_only=True)
            _, counts = run_batch(manifest, settings, signals=False, collect_lines=False)
            getattr(manifest, "close", lambda: None)()  # a list before issue 45
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        assert counts.succeeded == count


def test_a_batchs_memory_does_not_grow_with_its_jobs(tmp_path):
    _peak(tmp_path, 20)  # the imports, caches and pools a first batch makes
    small, large = _peak(tmp_path, 100), _peak(tmp_path, 600)
    grown = large - small
    assert grown < 500 * 64, f"{grown} bytes more for 500 more jobs: {grown / 500:.0f} a job kept"
