"""An event's time: the second's text is formatted once and reused while the clock stays in it;
any sequence of times still gives each one's own text."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from processkit.events.emitter import utc_timestamp

NS = st.integers(min_value=-(10**18), max_value=4 * 10**18)


def expected(ns: int) -> str:
    seconds, rest = divmod(max(0, ns), 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{rest // 1_000_000:03d}Z"


@given(
    st.lists(st.one_of(NS, st.sampled_from([0, 999_999_999, 1_000_000_000, 1_700_000_000_999_000_000])), max_size=20)
)
def test_every_time_gets_its_own_text_whatever_came_before(times):
    for ns in times:
        assert utc_timestamp(ns) == expected(ns)
