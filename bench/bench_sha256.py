"""SHA-256 throughput: the native pump's hash (pk_sha256_update) against hashlib (OpenSSL).

    python -m pytest bench/bench_sha256.py --benchmark-only

Both hash the same 64 MiB buffer in one call, so the comparison is the raw compression speed;
the native path is whichever the pump uses on this CPU (set PROCESSKIT_SHA=portable to time
the portable C code instead). Each result records its MB/s in extra_info.
"""

from __future__ import annotations

import hashlib
import os

import pytest

_native = pytest.importorskip("processkit._native", reason="the native pump (processkit._native) is not built")

SIZE = 64 * 1024 * 1024
DATA = os.urandom(SIZE)


def native_sha256(data: bytes) -> bytes:
    ffi, lib = _native.ffi, _native.lib
    ctx = ffi.new("pk_sha256 *")
    lib.pk_sha256_init(ctx)
    lib.pk_sha256_update(ctx, ffi.from_buffer("unsigned char[]", data), len(data))
    out = ffi.new("unsigned char[32]")
    lib.pk_sha256_final(ctx, out)
    return bytes(out)


def hashlib_sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


@pytest.mark.benchmark(group="sha256-64MiB")
@pytest.mark.parametrize("implementation", [native_sha256, hashlib_sha256], ids=["native", "hashlib"])
def test_sha256_throughput(benchmark, implementation):
    assert native_sha256(DATA) == hashlib_sha256(DATA)
    benchmark.extra_info["path"] = "accelerated" if _native.lib.pk_sha256_accelerated() else "portable"
    benchmark(implementation, DATA)
    benchmark.extra_info["MB/s (median)"] = round(SIZE / benchmark.stats.stats.median / 1e6, 1)
