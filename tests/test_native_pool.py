"""The native pump's pool of released read rings (csrc/pump.c): a freed stream's ring is the
next stream's of its size, never handed to two live streams at once, and the pool is bounded,
so a host that makes and frees streams run after run keeps its memory flat.
"""

from __future__ import annotations

import threading

import pytest

from processkit.engine.pump import CHUNK_SIZE

native = pytest.importorskip("processkit._native")
ffi, lib = native.ffi, native.lib


def new_stream(threaded: bool):
    stream = lib.pk_stream_new(-1, -1, 0, 0, CHUNK_SIZE, int(threaded))
    assert stream != ffi.NULL
    return stream


def mapped_kib() -> int:
    with open("/proc/self/status") as handle:
        fields = dict(line.split(":", 1) for line in handle)
    return int(fields["VmSize"].split()[0])


def test_a_freed_ring_is_the_next_stream_of_its_size():
    """Its bytes are still there, as they would not be in a fresh mapping (zeroed pages)."""
    first = new_stream(threaded=True)
    buf = first.buf
    ffi.buffer(first.buf, first.ring_size)[4096:4100] = b"kept"
    lib.pk_stream_free(first)
    small = new_stream(threaded=False)  # a quarter of the size: not that ring
    assert small.buf != buf
    again = new_stream(threaded=True)
    assert again.buf == buf
    assert ffi.buffer(again.buf, again.ring_size)[4096:4100] == b"kept"
    lib.pk_stream_free(again)
    lib.pk_stream_free(small)


def test_many_streams_run_after_run_keep_the_memory_bounded():
    """20 live streams at a time, 60 times over: without the bound (or with a leak) each round
    would map 20 MiB more."""
    before = mapped_kib()
    for _ in range(60):
        streams = [new_stream(threaded=True) for _ in range(20)]
        assert len({int(ffi.cast("uintptr_t", stream.buf)) for stream in streams}) == 20
        for stream in streams:
            lib.pk_stream_free(stream)
    assert mapped_kib() - before < 64 * 1024


def test_threads_never_share_a_ring():
    """Threads make and free streams at once (the C calls drop the GIL): each marks its ring and
    finds its mark intact before freeing it, which a ring handed out twice would break."""
    failures: list[int] = []

    def churn(mark: int) -> None:
        for _ in range(300):
            stream = new_stream(threaded=mark % 2 == 0)
            ring = ffi.buffer(stream.buf, stream.ring_size)
            ring[:64] = bytes([mark]) * 64
            other = new_stream(threaded=mark % 2 == 1)
            lib.pk_stream_free(other)
            if ring[:64] != bytes([mark]) * 64:
                failures.append(mark)
            lib.pk_stream_free(stream)

    threads = [threading.Thread(target=churn, args=(mark,)) for mark in range(1, 5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
