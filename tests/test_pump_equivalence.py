"""The native pump (processkit._native) against the Python reference, byte for byte, through
both the single-chunk pump() and the per-wakeup drain().

The pumps (Python; native hashing inline; native hashing on its own thread behind the reader)
drain a real non-blocking pipe fed in random pieces, into a capped capture file (or none) and
optionally a live echo (pipe, socket, /dev/null, a file, a file opened O_APPEND; pipes and
sockets with small buffers so backlogs really form), keeping each capture's head, its tail (a
ring in the file) or both ends. Once nothing more is to be captured the
native pump feeds the echo by splice(2), and falls back to read and write where the echo is
full or refuses spliced bytes (O_APPEND, sockets). They must leave identical capture files,
echoes, counts, flags and digests, and each digest must be the SHA-256 of the file. The native SHA-256 is also checked against known answers and hashlib on
both its accelerated and its portable path.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import hashlib
import json
import os
import platform
import random
import socket
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from processkit.engine.capture import CaptureTarget
from processkit.engine.echo import EchoSink
from processkit.loop import Loop
from processkit.engine.pump import CHUNK_SIZE, EOF_REACHED, WOULD_BLOCK, NativePump
from processkit.engine.pump_python import PythonPump
from processkit.spec import KEEP_MODES

try:
    from processkit import _native
except ImportError:
    _native = None

needs_native = pytest.mark.skipif(_native is None, reason="the native pump (processkit._native) is not built")


class InlineNativePump(NativePump):
    """The native pump hashing on the caller's thread."""

    def __init__(self, fd, capture, echo):
        super().__init__(fd, capture, echo, hash_thread=False)


class ThreadedNativePump(NativePump):
    """The native pump hashing on a thread of its own behind the reader."""

    def __init__(self, fd, capture, echo):
        super().__init__(fd, capture, echo, hash_thread=True)


PUMPS = (PythonPump, InlineNativePump, ThreadedNativePump)
# Single-pump cases: the Python reference still runs when the native pump is missing.
EACH_PUMP = pytest.mark.parametrize(
    "cls",
    [
        PythonPump,
        pytest.param(InlineNativePump, marks=needs_native),
        pytest.param(ThreadedNativePump, marks=needs_native),
    ],
    ids=["python", "native", "native-threaded"],
)
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
SMALL_BUFFER = 4096  # echo pipes and sockets this small fill up and make the echo queue


@dataclasses.dataclass
class Outcome:
    report: dict
    seen: int
    captured: bytes
    echoed: bytes | None


class Echo:
    """A live echo consumer that the test drains between pump calls."""

    def __init__(self, kind: str, directory):
        self.kind = kind
        self.loop = Loop()
        self.read_fd = -1
        self.received = bytearray()
        self._socket_pair = None
        if kind == "pipe":
            self.read_fd, write_fd = os.pipe()
            fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, SMALL_BUFFER)
        elif kind == "socket":
            self._socket_pair = socket.socketpair()
            self._socket_pair[0].setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL_BUFFER)
            self.read_fd = self._socket_pair[1].fileno()
            write_fd = self._socket_pair[0].fileno()
        elif kind in ("file", "append"):  # read back through a description of its own
            path = os.path.join(directory, f"echo-{kind}.out")
            append = os.O_APPEND if kind == "append" else 0
            write_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | append, 0o600)
            self.read_fd = os.open(path, os.O_RDONLY)
        else:
            write_fd = os.open(os.devnull, os.O_WRONLY)
        if self.read_fd >= 0:
            os.set_blocking(self.read_fd, False)
        self._write_fd = write_fd
        self.sink = EchoSink(self.loop, write_fd, lambda: None)

    def drain(self) -> None:
        """Take what is readable and let the sink flush its backlog into the room made."""
        while True:
            if self.read_fd >= 0:
                try:
                    while chunk := os.read(self.read_fd, 1 << 20):
                        self.received += chunk
                except BlockingIOError:
                    pass
            if not self.sink.backlog:
                return
            self.loop.run_once(0)

    def hang_up(self) -> None:
        """The consumer goes away: the next echo write fails with EPIPE."""
        if self._socket_pair:
            self._socket_pair[1].close()
        else:
            os.close(self.read_fd)
        self.read_fd = -1

    def close(self) -> None:
        self.sink.close()
        self.loop.close()
        if self._socket_pair:
            for end in self._socket_pair:
                end.close()  # a no-op on an end already closed
        else:
            os.close(self._write_fd)
            if self.read_fd >= 0:
                os.close(self.read_fd)


def step(pump, budget: int | None) -> int:
    """One pump() call, or one drain() of ``budget`` bytes (the runner's per-wakeup call)."""
    return pump.pump() if budget is None else pump.drain(budget)


def pump_until_blocked(pump, echo: Echo | None, budget: int | None = None) -> int:
    """Pump until the feed is empty for now; returns the last result."""
    while True:
        count = step(pump, budget)
        if echo:
            echo.drain()
        if count in (WOULD_BLOCK, EOF_REACHED):
            return count


def run_pump(
    cls,
    directory,
    data: bytes,
    pieces: list[int],
    pauses: list[int],
    cap: int,
    echo_kind: str,
    big_pipe: bool,
    budget: int | None = None,
    capture: bool = True,
    keep: str = "head",
) -> Outcome:
    """Feed ``data`` through a pipe in ``pieces`` (cycled), pumping ``pauses`` times (cycled) between.

    ``budget`` None steps with pump(); a number drains up to that many bytes per call. Without
    ``capture`` the pump has no capture file (the file stays empty and there is no report).
    """
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    if big_pipe:  # lets one read fill the pump's whole CHUNK_SIZE buffer
        fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    path = os.path.join(directory, f"{cls.__name__}.log")
    capture_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    echo = Echo(echo_kind, directory) if echo_kind != "none" else None
    try:
        target = CaptureTarget(path, capture_fd, cap, keep) if capture else None
        pump = cls(read_fd, target, echo.sink if echo else None)
        position, turn = 0, 0
        while position < len(data):
            piece = data[position : position + pieces[turn % len(pieces)]]
            while piece:
                try:
                    written = os.write(write_fd, piece)
                except BlockingIOError:
                    written = 0
                position += written
                piece = piece[written:]
                if piece:  # the pipe is full: the pump makes room
                    pump_until_blocked(pump, echo, budget)
            for _ in range(pauses[turn % len(pauses)]):
                step(pump, budget)
                if echo:
                    echo.drain()
            turn += 1
        os.close(write_fd)
        write_fd = -1
        while pump_until_blocked(pump, echo, budget) != EOF_REACHED:
            pass
        report = pump.report()
        seen = pump.seen
    finally:
        os.close(read_fd)
        os.close(capture_fd)
        if write_fd >= 0:
            os.close(write_fd)
        if echo:
            echo.close()
    with open(path, "rb") as handle:
        captured = handle.read()
    fields = None
    if report is not None:
        fields = report.as_event()
        del fields["path"]
        fields["cap"] = report.cap
        fields["kept"] = report.kept
    return Outcome(fields, seen, captured, bytes(echo.received) if echo and echo.read_fd >= 0 else None)


def kept_slice(data: bytes, cap: int, keep: str) -> bytes:
    """What a capture file must hold: the stream's first ``cap`` bytes, its last, or the first
    half of the cap and the last half."""
    if len(data) <= cap or keep == "head":
        return data[:cap]
    head = 0 if keep == "tail" else cap // 2
    return data[:head] + data[len(data) - (cap - head) :]


def check_equivalent(tmp_dir, data: bytes, cap: int, capture: bool = True, keep: str = "head", **feeding) -> None:
    python, *natives = (run_pump(cls, tmp_dir, data, cap=cap, capture=capture, keep=keep, **feeding) for cls in PUMPS)
    for native in natives:
        assert native.report == python.report
        assert native.seen == python.seen == len(data)
        assert native.captured == python.captured == (kept_slice(data, cap, keep) if capture else b"")
        assert native.echoed == python.echoed
    if python.echoed is not None:
        assert python.echoed == data
    report = python.report
    if report is None:
        assert not capture
        return
    assert report["bytes_written"] == min(cap, len(data))
    assert report["truncated"] == (len(data) > cap)
    assert report["write_error"] is False
    assert report["sha256"] == hashlib.sha256(python.captured).hexdigest()
    assert sum(end - start for start, end in report["kept"]) == report["bytes_written"]
    assert b"".join(data[start:end] for start, end in report["kept"]) == python.captured


def random_bytes(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


payloads = st.one_of(
    st.binary(max_size=600),  # NULs, invalid UTF-8, lengths around block boundaries
    # Several CHUNK_SIZE reads, many pipe-fulls and echo backlogs.
    st.builds(random_bytes, st.integers(100_000, 700_000), st.integers(0, 2**32)),
)


@needs_native
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=payloads,
    cap_rule=st.sampled_from(["len", "len-1", "len+1", "small", "any"]),
    cap_draw=st.integers(1, 2**20),
    piece_counts=st.lists(st.integers(1, 64), min_size=1, max_size=6),
    pauses=st.lists(st.integers(0, 3), min_size=1, max_size=6),
    echo_kind=st.sampled_from(["none", "pipe", "socket", "devnull", "file", "append"]),
    big_pipe=st.booleans(),
    budget=st.sampled_from([None, 1, 4096, CHUNK_SIZE, 1 << 30]),
    capture=st.booleans(),
    keep=st.sampled_from(KEEP_MODES),
)
def test_native_matches_python(
    data, cap_rule, cap_draw, piece_counts, pauses, echo_kind, big_pipe, budget, capture, keep, tmp_path_factory
):
    size = len(data)
    cap = {
        "len": size,
        "len-1": size - 1,
        "len+1": size + 1,
        "small": cap_draw % 130,
        "any": cap_draw % (2 * size + 2),
    }[cap_rule]
    # Pieces are fractions of the payload, so a large payload is never fed a byte at a time.
    pieces = [max(1, size * count // 64) for count in piece_counts]
    check_equivalent(
        tmp_path_factory.mktemp("pump"),
        data,
        max(1, cap),
        pieces=pieces,
        pauses=pauses,
        echo_kind=echo_kind,
        big_pipe=big_pipe,
        budget=budget,
        capture=capture,
        keep=keep,
    )


@needs_native
@pytest.mark.parametrize(
    "cap",
    [1, 63, 64, 65, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, 3 * CHUNK_SIZE + 7, 1_999_999, 2_000_000, 2_000_001],
)
@pytest.mark.parametrize("budget", [None, 1 << 30], ids=["pump", "drain"])
@pytest.mark.parametrize("keep", KEEP_MODES)
def test_caps_around_full_chunks(cap, budget, keep, tmp_path):
    """Whole CHUNK_SIZE reads (a 1 MiB pipe) with the cap falling on and around their edges; with
    a ring, chunks longer than it and chunks straddling its wrap."""
    data = random_bytes(2_000_000, seed=cap)
    check_equivalent(
        tmp_path, data, cap, pieces=[1 << 20], pauses=[0], echo_kind="pipe", big_pipe=True, budget=budget, keep=keep
    )


@needs_native
@pytest.mark.parametrize("keep", ["tail", "head-tail"])
@pytest.mark.parametrize("piece", [300, 700, 999, 1000, 1001, 2500])
def test_writes_straddling_the_ring_wrap(keep, piece, tmp_path):
    """One read per piece, so chunk edges fall across the ring's end (a 1000-byte cap: the ring
    is 1000 or 500 bytes), or a chunk is longer than the whole ring."""
    data = random_bytes(10_007, seed=piece)
    check_equivalent(
        tmp_path, data, 1000, pieces=[piece], pauses=[1], echo_kind="none", big_pipe=False, budget=None, keep=keep
    )


def pump_into_unwritable(cls, capture_fd: int, data: bytes, path: str, budget: int | None, between=None):
    """Pump ``data`` (fed in two halves) into ``capture_fd``; ``between`` runs after the first half."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    try:
        pump = cls(read_fd, CaptureTarget(path, capture_fd, 1 << 30), None)
        half = len(data) // 2
        os.write(write_fd, data[:half])
        pump_until_blocked(pump, None, budget)
        if between:
            between()
        os.write(write_fd, data[half:])
        os.close(write_fd)
        write_fd = -1
        assert pump_until_blocked(pump, None, budget) == EOF_REACHED
        return pump.report(), pump.seen
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)


EACH_STEP = pytest.mark.parametrize("budget", [None, 1 << 30], ids=["pump", "drain"])


@EACH_STEP
@EACH_PUMP
def test_write_error_latches_and_counting_goes_on(cls, budget, tmp_path):
    """A capture fd that refuses every write (EBADF): nothing retained, every byte still seen."""
    path = tmp_path / "readonly.log"
    path.write_bytes(b"")
    capture_fd = os.open(path, os.O_RDONLY)
    data = random_bytes(300_000, seed=1)
    try:
        report, seen = pump_into_unwritable(cls, capture_fd, data, str(path), budget)
    finally:
        os.close(capture_fd)
    assert (report.bytes_seen, seen, report.bytes_written) == (len(data), len(data), 0)
    assert report.write_error is True
    assert report.truncated is False
    assert report.sha256 == EMPTY_SHA256
    assert path.read_bytes() == b""


@EACH_STEP
@EACH_PUMP
def test_partial_write_is_hashed_then_the_error_latches(cls, budget, tmp_path):
    """A full non-blocking pipe as the capture: a short write, then EAGAIN latches the error.

    The digest covers exactly the accepted prefix, and nothing more is written even once the
    pipe has room again.
    """
    capture_read, capture_write = os.pipe()
    os.set_blocking(capture_read, False)
    os.set_blocking(capture_write, False)
    fcntl.fcntl(capture_write, fcntl.F_SETPIPE_SZ, SMALL_BUFFER)
    data = random_bytes(50_000, seed=2)
    taken = bytearray()

    def make_room():
        taken.extend(os.read(capture_read, 1 << 20))

    try:
        report, seen = pump_into_unwritable(cls, capture_write, data, "pipe", budget, between=make_room)
        try:
            taken.extend(os.read(capture_read, 1 << 20))
        except BlockingIOError:
            pass
    finally:
        os.close(capture_read)
        os.close(capture_write)
    assert bytes(taken) == data[:SMALL_BUFFER]
    assert (report.bytes_seen, seen, report.bytes_written) == (len(data), len(data), SMALL_BUFFER)
    assert report.write_error is True
    assert report.sha256 == hashlib.sha256(data[:SMALL_BUFFER]).hexdigest()


@pytest.mark.parametrize("cap", [1 << 20, 100], ids=["capturing", "cap-reached"])  # the latter splices
@pytest.mark.parametrize("kind", ["pipe", "socket"])
@EACH_STEP
@EACH_PUMP
def test_vanished_echo_consumer_breaks_only_the_echo(cls, kind, budget, cap, tmp_path):
    """EPIPE on the echo marks the sink broken; capture and counting carry on untouched."""
    echo = Echo(kind, tmp_path)
    echo.hang_up()
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    capture_fd = os.open(tmp_path / "out.log", os.O_WRONLY | os.O_CREAT, 0o600)
    data = random_bytes(10_000, seed=5)
    try:
        pump = cls(read_fd, CaptureTarget(str(tmp_path / "out.log"), capture_fd, cap), echo.sink)
        os.write(write_fd, data)
        os.close(write_fd)
        while pump_until_blocked(pump, None, budget) != EOF_REACHED:
            pass
        report = pump.report()
        assert echo.sink.broken
    finally:
        os.close(read_fd)
        os.close(capture_fd)
        echo.close()
    retained = min(cap, len(data))
    assert (report.bytes_seen, report.bytes_written, report.write_error) == (len(data), retained, False)
    assert (tmp_path / "out.log").read_bytes() == data[:retained]


@needs_native
@pytest.mark.parametrize(("kind", "splices"), [("pipe", True), ("devnull", True), ("file", False), ("socket", False)])
def test_echo_only_native_pump_splices_where_the_echo_allows(kind, splices, tmp_path):
    """Without capture the native pump moves the bytes by splice into a pipe or a device (no
    chunk left in its buffer); a regular file and a socket are written."""
    echo = Echo(kind, tmp_path)
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    data = random_bytes(3000, seed=6)
    try:
        pump = InlineNativePump(read_fd, None, echo.sink)
        os.write(write_fd, data)
        assert pump.drain(1 << 30) == len(data)
        assert (pump._result.last == 0) is splices
        assert pump._stream.no_splice == 0
        echo.drain()
        if echo.read_fd >= 0:
            assert bytes(echo.received) == data
    finally:
        os.close(read_fd)
        os.close(write_fd)
        echo.close()


@needs_native
def test_spliced_echo_into_a_full_pipe_queues_and_pauses_like_a_write(tmp_path):
    """A full echo makes splice fail as an empty pipe would; the pump tells them apart and queues
    a chunk read the ordinary way, so the backlog (and backpressure) is the one a write makes. It
    does so in the drain whose splice filled the echo: a short splice does not end a drain, or a
    full echo would look like a slow writer (tests/test_echo_splice_short.py)."""
    echo = Echo("pipe", tmp_path)
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    data = random_bytes(800_000, seed=7)
    try:
        pump = InlineNativePump(read_fd, None, echo.sink)
        os.write(write_fd, data)
        total = pump.drain(1 << 30)
        assert 0 < len(echo.sink.backlog) and total < len(data)
        assert pump.drain(1 << 30) > 0  # behind the backlog: read and queued, never spliced past it
        os.close(write_fd)
        write_fd = -1
        while pump_until_blocked(pump, echo, 1 << 30) != EOF_REACHED:
            pass
        assert bytes(echo.received) == data
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)
        echo.close()


@EACH_STEP
@EACH_PUMP
def test_read_errors_surface_as_oserror(cls, budget, tmp_path):
    directory_fd = os.open(tmp_path, os.O_RDONLY)
    try:
        pump = cls(directory_fd, None, None)
        with pytest.raises(OSError) as failure:
            step(pump, budget)
    finally:
        os.close(directory_fd)
    assert failure.value.errno == errno.EISDIR
    assert pump.report() is None


# ---- SHA-256 ------------------------------------------------------------------------------------

KNOWN_ANSWERS = {
    b"": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    b"abc": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq": (
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
    ),
    b"a" * 1_000_000: "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
}

# Hashes each hex input from stdin whole and in uneven pieces; prints the digests as JSON.
NATIVE_DIGESTS = textwrap.dedent(
    """
    import json, sys
    from processkit._native import ffi, lib

    def digest(data, pieces):
        ctx = ffi.new("pk_sha256 *")
        lib.pk_sha256_init(ctx)
        position = 0
        for size in pieces:
            piece = data[position : position + size]
            lib.pk_sha256_update(ctx, ffi.from_buffer("unsigned char[]", piece), len(piece))
            position += size
        out = ffi.new("unsigned char[32]")
        lib.pk_sha256_final(ctx, out)
        return bytes(out).hex()

    inputs = [bytes.fromhex(item) for item in json.load(sys.stdin)]
    uneven = [1, 63, 64, 65, 3, 128, 191, 4096, 7] * 4 + [1 << 30]
    print(json.dumps({
        "accelerated": lib.pk_sha256_accelerated(),
        "whole": [digest(data, [len(data)]) for data in inputs],
        "pieces": [digest(data, uneven) for data in inputs],
    }))
    """
)


def sha_inputs() -> list[bytes]:
    prefix = random_bytes(300, seed=3)
    return list(KNOWN_ANSWERS) + [prefix[:n] for n in range(201)] + [b"a" * (1 << 20), random_bytes(100_003, seed=4)]


def native_digests(sha_env: str | None) -> dict:
    env = dict(os.environ)
    env.pop("PROCESSKIT_SHA", None)
    if sha_env is not None:
        env["PROCESSKIT_SHA"] = sha_env
    done = subprocess.run(
        [sys.executable, "-c", NATIVE_DIGESTS],
        input=json.dumps([data.hex() for data in sha_inputs()]),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)


def cpu_has_sha_extensions() -> bool:
    try:
        with open("/proc/cpuinfo") as handle:
            info = handle.read().split()
    except OSError:
        return False
    machine = platform.machine()
    return ("sha_ni" in info) if machine in ("x86_64", "AMD64") else ("sha2" in info and machine == "aarch64")


@needs_native
@pytest.mark.parametrize("sha_env", [None, "portable"], ids=["dispatched", "portable"])
def test_sha256_known_answers_on_both_paths(sha_env):
    result = native_digests(sha_env)
    if sha_env == "portable":
        assert result["accelerated"] == 0
    elif cpu_has_sha_extensions():
        assert result["accelerated"] == 1, "the CPU has SHA extensions but the portable path was chosen"
    expected = [hashlib.sha256(data).hexdigest() for data in sha_inputs()]
    assert result["whole"] == expected
    assert result["pieces"] == expected
    assert result["whole"][: len(KNOWN_ANSWERS)] == list(KNOWN_ANSWERS.values())


def native_sha256(pieces) -> str:
    ffi, lib = _native.ffi, _native.lib
    ctx = ffi.new("pk_sha256 *")
    lib.pk_sha256_init(ctx)
    for piece in pieces:
        lib.pk_sha256_update(ctx, ffi.from_buffer("unsigned char[]", piece), len(piece))
    out = ffi.new("unsigned char[32]")
    lib.pk_sha256_final(ctx, out)
    return bytes(out).hex()


@needs_native
@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(st.binary(max_size=300), max_size=12))
def test_sha256_incremental_matches_hashlib(pieces):
    assert native_sha256(pieces) == hashlib.sha256(b"".join(pieces)).hexdigest()


@needs_native
def test_sha256_final_leaves_the_state_alone():
    """pk_sha256_final (and so pk_stream_digest) may be called mid-stream."""
    ffi, lib = _native.ffi, _native.lib
    ctx = ffi.new("pk_sha256 *")
    lib.pk_sha256_init(ctx)
    out = ffi.new("unsigned char[32]")
    lib.pk_sha256_update(ctx, b"a" * 100, 100)
    lib.pk_sha256_final(ctx, out)
    assert bytes(out).hex() == hashlib.sha256(b"a" * 100).hexdigest()
    lib.pk_sha256_update(ctx, b"b" * 100, 100)
    lib.pk_sha256_final(ctx, out)
    assert bytes(out).hex() == hashlib.sha256(b"a" * 100 + b"b" * 100).hexdigest()


@needs_native
def test_an_echo_that_refuses_spliced_bytes_is_written_from_then_on(tmp_path):
    """/dev/full has no splice support (EINVAL): the stream stops splicing and writes, which
    fails with ENOSPC and breaks the echo alone, as it does for the Python pump."""
    full = os.open("/dev/full", os.O_WRONLY)
    loop = Loop()
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    data = random_bytes(3000, seed=8)
    try:
        sink = EchoSink(loop, full, lambda: None)
        assert sink.splices
        pump = InlineNativePump(read_fd, None, sink)
        os.write(write_fd, data)
        assert pump.drain(1 << 30) == len(data)
        assert pump._stream.no_splice == 1
        assert sink.broken
        os.write(write_fd, data)
        assert pump.drain(1 << 30) == len(data)
        assert pump.seen == 2 * len(data)
    finally:
        os.close(read_fd)
        os.close(write_fd)
        sink.close()
        loop.close()
        os.close(full)


@pytest.mark.parametrize("keep", ["tail", "head-tail"])
@EACH_PUMP
def test_a_ring_needs_a_regular_file(cls, keep, tmp_path):
    """A ring is rewritten in place: into a pipe nothing is written and write_error is set."""
    capture_read, capture_write = os.pipe()
    os.set_blocking(capture_read, False)
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    data = random_bytes(10_000, seed=7)
    try:
        pump = cls(read_fd, CaptureTarget("pipe", capture_write, 100, keep), None)
        os.write(write_fd, data)
        os.close(write_fd)
        while pump_until_blocked(pump, None, 1 << 30) != EOF_REACHED:
            pass
        report = pump.report()
        with pytest.raises(BlockingIOError):
            os.read(capture_read, 1)
    finally:
        for fd in (capture_read, capture_write, read_fd):
            os.close(fd)
    assert (report.bytes_seen, report.bytes_written, report.write_error) == (len(data), 0, True)
    assert (report.sha256, report.kept) == (EMPTY_SHA256, ())


# (piece, keep) -> the stream ranges a 5000-byte ring cut at 3000 file bytes holds: fed in small
# pieces the ring fills in order; fed at once only the chunk's last ring-full was being written.
CUT_SHORT = {
    (1000, "tail"): ((0, 3000),),
    (1000, "head-tail"): ((0, 3000),),
    (20_000, "tail"): ((15_000, 18_000),),
    (20_000, "head-tail"): ((0, 2500), (17_500, 18_000)),
}


@pytest.mark.parametrize(("piece", "keep"), list(CUT_SHORT))
@EACH_PUMP
def test_a_ring_cut_short_by_a_write_error_keeps_what_it_stored(cls, piece, keep, tmp_path):
    """RLIMIT_FSIZE stops the file at 3000 bytes of a 5000-byte cap: the file holds, in order,
    the bytes stored before the failure and nothing stale, the report names them, and the
    digest is the file's."""
    import resource
    import signal

    path = tmp_path / "out.log"
    capture_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    data = random_bytes(20_000, seed=8)
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        pump = cls(read_fd, CaptureTarget(str(path), capture_fd, 5000, keep), None)
        resource.setrlimit(resource.RLIMIT_FSIZE, (3000, limits[1]))
        try:
            for at in range(0, len(data), piece):
                os.write(write_fd, data[at : at + piece])
                pump_until_blocked(pump, None, 1 << 30)
            os.close(write_fd)
            while pump_until_blocked(pump, None, 1 << 30) != EOF_REACHED:
                pass
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        report = pump.report()
    finally:
        signal.signal(signal.SIGXFSZ, previous)
        os.close(read_fd)
        os.close(capture_fd)
    kept = CUT_SHORT[piece, keep]
    expected = b"".join(data[start:end] for start, end in kept)
    assert path.read_bytes() == expected
    assert (report.bytes_seen, report.bytes_written, report.write_error) == (len(data), len(expected), True)
    assert report.kept == kept
    assert report.sha256 == hashlib.sha256(expected).hexdigest()


@EACH_PUMP
def test_a_ring_that_cannot_be_put_in_order_is_emptied(cls, tmp_path, monkeypatch):
    """A failure while rotating leaves bytes in no known order: the file is emptied, so the
    report (nothing written, write_error) still says what it holds."""
    from processkit.engine import capture_keep

    def fail(*_):
        raise OSError(errno.EIO, "injected")

    monkeypatch.setattr(capture_keep, "_rotate", fail)
    path = tmp_path / "out.log"
    capture_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    try:
        pump = cls(read_fd, CaptureTarget(str(path), capture_fd, 1000, "tail"), None)
        os.write(write_fd, random_bytes(2500, seed=9))
        os.close(write_fd)
        while pump_until_blocked(pump, None, 1 << 30) != EOF_REACHED:
            pass
        report = pump.report()
    finally:
        os.close(read_fd)
        os.close(capture_fd)
    assert path.read_bytes() == b""
    assert (report.bytes_seen, report.bytes_written, report.write_error, report.kept) == (2500, 0, True, ())
    assert report.sha256 == EMPTY_SHA256


@needs_native
def test_the_sha256_path_is_chosen_when_the_module_loads():
    """``PROCESSKIT_SHA`` is read by the importing thread as the module loads, never on the first
    hash (which may run on the pump's hashing thread, beside a setenv in a caller's thread): a
    change to the environment after the import chooses nothing."""
    if not cpu_has_sha_extensions():
        pytest.skip("the CPU has no SHA extensions: both choices are the portable path")
    code = "import os, processkit._native as n; os.environ.pop('PROCESSKIT_SHA'); print(n.lib.pk_sha256_accelerated())"
    env = dict(os.environ, PROCESSKIT_SHA="portable")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert (done.returncode, done.stdout) == (0, "0\n"), done.stderr
