"""What a CI machine asks of a batch, as cargo-nextest answers it: a pause between a failed
attempt and the next (``--retry-delay``, fixed or doubling), and this machine's share of the jobs
(``--partition``), deterministic, so that N machines given 1/N ... N/N run every job exactly once.
"""

from __future__ import annotations

import hashlib

from ..errors import usage
from ..grammar.values import parse_count, parse_duration_ms
from ..text import cut

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .manifest import Job

RETRY_DELAY_FLAG = "--retry-delay <DUR|exp:DUR>"
PARTITION_FLAG = "--partition <[count:|hash:]K/N>"
MAX_DELAY_MS = 3_600_000  # a doubling delay stops growing at an hour


class RetryDelay:
    """``DUR`` before every attempt after the first, or with ``exp:`` ``DUR`` before the second,
    twice that before the third, and so on (at most an hour)."""

    __slots__ = ("ms", "exponential")

    def __init__(self, ms: int, exponential: bool):
        self.ms = ms
        self.exponential = exponential

    def before(self, attempt: int) -> int:
        """The pause, in ms, before ``attempt`` (2 is the first retry)."""
        if attempt < 2 or not self.ms:
            return 0
        if not self.exponential:
            return self.ms
        return min(MAX_DELAY_MS, self.ms << min(attempt - 2, 32))


def parse_retry_delay(text: str) -> RetryDelay:
    exponential = text.startswith("exp:")
    duration = text[4:] if exponential else text
    return RetryDelay(parse_duration_ms(duration, RETRY_DELAY_FLAG, positive=False), exponential)


class Partition:
    """``K/N``: the K-th of N shares, by the jobs' order (``count``: job 1 to share 1, job 2 to
    share 2, ... round robin) or by a digest of each id (``hash``: a job keeps its share when
    others are added or removed)."""

    __slots__ = ("index", "total", "by_hash")

    def __init__(self, index: int, total: int, by_hash: bool):
        self.index = index
        self.total = total
        self.by_hash = by_hash

    def share(self, jobs: list[Job]) -> list[Job]:
        return [job for position, job in enumerate(jobs) if self.holds(position, job.id)]

    def holds(self, position: int, job_id: str) -> bool:
        """Whether the job at ``position`` (from 0) of the whole, with ``job_id``, is in this share:
        the batch's cut and ``--dry-run``'s listing ask alike."""
        if self.by_hash:
            return _bucket(job_id, self.total) == self.index - 1
        return position % self.total == self.index - 1


def _bucket(job_id: str, total: int) -> int:
    return int.from_bytes(hashlib.sha256(job_id.encode("utf-8", "surrogatepass")).digest()[:8], "big") % total


def parse_partition(text: str) -> Partition:
    kind, colon, rest = text.partition(":")
    if not colon:
        kind, rest = "count", text
    index, slash, total = rest.partition("/")
    if kind not in ("count", "hash") or not slash:
        raise usage(f"invalid value '{cut(text)}' for '{PARTITION_FLAG}': expected K/N, count:K/N or hash:K/N")
    n = parse_count(total, PARTITION_FLAG, low=1, high=1_000_000)
    k = parse_count(index, PARTITION_FLAG, low=1, high=n)
    return Partition(k, n, kind == "hash")
