"""An event's time: the second's and the millisecond's text are formatted once and reused while
the clock stays in them; any sequence of times, at either precision, still gives each one's own
text."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from processkit.events.emitter import utc_timestamp

NS = st.integers(min_value=-(10**18), max_value=4 * 10**18)


def expected(ns: int, digits: int = 3) -> str:
    seconds, rest = divmod(max(0, ns), 1_000_000_000)
    fraction = str(rest // 10 ** (9 - digits)).zfill(digits)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{fraction}Z"


# Around a second's and a millisecond's edges, where a kept text must not be reused.
EDGES = [0, 999_999, 1_000_000, 999_999_999, 1_000_000_000, 1_700_000_000_998_999_999, 1_700_000_000_999_000_000]


@given(st.lists(st.tuples(st.one_of(NS, st.sampled_from(EDGES)), st.sampled_from([3, 3, 6])), max_size=20))
def test_every_time_gets_its_own_text_whatever_came_before(times):
    for ns, digits in times:
        assert utc_timestamp(ns, digits) == expected(ns, digits)
