"""A look at a run from the main thread (``handle.poll()``, and the zero-time looks of
``await handle.wait_async()``) while another thread's ``start()``ed run was open never saw the run
end: the look found the socket readable and left the reply to a relay, but a look never goes to
one, so the reply stayed unread until another thread happened to read (here: never)."""

from __future__ import annotations

import pytest
from conftest import SAFETY_NET
from test_api_suspended_reader import _seen

# The other thread's run is open until its stdin is closed; the main thread starts ``true`` and looks
# at it until it has ended (up to a bound, a safety net: a right run sees the end at once).
CALLER = r"""
import asyncio, json, subprocess, sys, threading, time, processkit

how, bound = sys.argv[1], float(sys.argv[2])
handles = []
other = threading.Thread(target=lambda: handles.append(processkit.start(["cat"], stdin=subprocess.PIPE)))
other.start()
other.join()
handle = processkit.start(["true"])
seen = {}
if how == "poll":
    deadline = time.monotonic() + bound
    while (code := handle.poll()) is None and time.monotonic() < deadline:
        pass
    seen["ended"] = code
else:
    async def waited():
        try:
            return await asyncio.wait_for(handle.wait_async(), bound)
        except asyncio.TimeoutError:
            return None
    seen["ended"] = asyncio.run(waited())
handles[0].stdin.close()
seen["other"] = handles[0].wait()
print(json.dumps(seen), flush=True)
"""


@pytest.mark.parametrize("how", ["poll", "wait_async"])
def test_a_main_thread_look_sees_its_run_end_while_another_threads_run_is_open(how):
    seen = _seen(CALLER, how, str(SAFETY_NET / 3))
    assert seen == {"ended": 0, "other": 0}, "the look read the reply for itself"
