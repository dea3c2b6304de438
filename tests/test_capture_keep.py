"""``run --capture-keep head|tail|head-tail`` (an extension): each file is exactly the expected
slice of a known stream, the report is truthful (counts, digest of the file, truncated), the
layout record beside the files says which ranges were kept, and the Python API, ``report`` and
``--capture-overflow cancel`` know the mode. Through both pumps."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess

import pytest

from conftest import cli_command, run_cli
from payloads import block, child_command
from streams import one, run_checked

# Every API run here cuts its capture files on purpose: the warning that says so is expected.
pytestmark = pytest.mark.filterwarnings("ignore::processkit.CaptureTruncated")

MODES = ("head", "tail", "head-tail")
CAP = 1000


def kept_slice(data: bytes, cap: int, keep: str) -> bytes:
    if len(data) <= cap or keep == "head":
        return data[:cap]
    head = 0 if keep == "tail" else cap // 2
    return data[:head] + data[len(data) - (cap - head) :]


def kept_ranges(size: int, cap: int, keep: str) -> list[list[int]]:
    if size <= cap or keep == "head":
        return [[0, min(size, cap)]] if size else []
    head = 0 if keep == "tail" else cap // 2
    return ([[0, head]] if head else []) + [[size - (cap - head), size]]


def sha256sum(path) -> str:
    """The digest as the coreutils tool prints it (not our code, not hashlib's)."""
    return subprocess.run(["sha256sum", str(path)], capture_output=True, check=True).stdout.split()[0].decode()


@pytest.mark.parametrize("keep", MODES)
@pytest.mark.parametrize("out_size", [CAP - 1, CAP, CAP + 1, 300_000], ids=["shorter", "equal", "one-longer", "long"])
def test_each_mode_keeps_its_slice_of_each_stream(tmp_path, pump_backend, keep, out_size):
    out, err = block(1, out_size), block(2, 2 * CAP + 3)
    cap_dir = tmp_path / "cap"
    command = child_command(f"p.interleave(p.block(1, {out_size}), p.block(2, {2 * CAP + 3}))")
    args = ("--capture-dir", cap_dir, "--capture-max-bytes", str(CAP), "--capture-keep", keep, "--no-echo")
    _, events = run_checked(tmp_path, *args, command=command, returncode=0)
    report = one(events, "output_captured")
    layout = json.loads((cap_dir / "capture-keep.json").read_text()) if keep != "head" else None
    for name, produced in (("stdout", out), ("stderr", err)):
        path = cap_dir / f"{name}.log"
        content = path.read_bytes()
        assert content == kept_slice(produced, CAP, keep)
        stream = report[name]
        assert stream["bytes"] == stream["bytes_seen"] == len(produced)
        assert stream["bytes_written"] == len(content) == min(CAP, len(produced))
        assert stream["sha256"] == sha256sum(path)
        assert stream["truncated"] == (len(produced) > CAP)
        assert stream["write_error"] is False
        if layout is not None:
            assert layout[name]["kept"] == kept_ranges(len(produced), CAP, keep)
            assert (layout[name]["sha256"], layout[name]["bytes_seen"]) == (stream["sha256"], len(produced))
    if layout is None:
        assert sorted(p.name for p in cap_dir.iterdir()) == ["stderr.log", "stdout.log"]
    else:
        assert (layout["run_id"], layout["keep"], layout["cap"]) == (events[0]["run_id"], keep, CAP)


def test_head_is_the_default_and_unchanged(tmp_path):
    """--capture-keep head is the reference's capture: the same files and event as no flag."""
    command = child_command("p.write_all(1, p.block(3, 5000))")
    results = []
    for flags in ((), ("--capture-keep", "head")):
        cap_dir = tmp_path / f"cap{len(flags)}"
        _, events = run_checked(
            tmp_path, "--capture-dir", cap_dir, "--capture-max-bytes", "1k", *flags, command=command
        )
        captured = one(events, "output_captured")
        for name in ("stdout", "stderr"):
            captured[name]["path"] = captured[name]["path"].replace(str(cap_dir), "")
        results.append((captured["stdout"], captured["stderr"], sorted(p.name for p in cap_dir.iterdir())))
        assert (cap_dir / "stdout.log").read_bytes() == block(3, 5000)[:1024]
    assert results[0] == results[1]


@pytest.mark.parametrize("keep", ["tail", "head-tail"])
def test_overflow_cancel_keeps_what_the_child_wrote_last(tmp_path, pump_backend, keep):
    """cancel still cancels once a stream passes the cap (113); the file then holds the end of
    what the child produced until it was stopped."""
    cap_dir = tmp_path / "cap"
    data = block(4, 4 << 20)
    command = child_command("p.write_all(1, p.block(4, 4 << 20)); import time; time.sleep(60)")
    args = ("--capture-dir", cap_dir, "--capture-max-bytes", "100k", "--capture-overflow", "cancel")
    _, events = run_checked(tmp_path, *args, "--capture-keep", keep, "--no-echo", command=command, returncode=113)
    assert one(events, "output_overflow")["max_bytes"] == 100 << 10
    stream = one(events, "output_captured")["stdout"]
    seen = stream["bytes_seen"]
    assert seen > 100 << 10 and stream["truncated"] is True
    assert (cap_dir / "stdout.log").read_bytes() == kept_slice(data[:seen], 100 << 10, keep)


@pytest.mark.parametrize(
    "args, message",
    [
        (("--capture-keep", "tail"), "the argument '--capture-keep' requires '--capture-dir'"),
        (("--capture-dir", "d", "--capture-keep", "middle"), "invalid choice"),
        (("--inherit-stdio", "--capture-keep", "tail"), "cannot be used with '--capture-keep'"),
    ],
)
def test_the_flag_is_checked_like_its_siblings(tmp_path, args, message):
    proc = run_cli("run", "--jsonl", tmp_path / "r.jsonl", *args, "--", "true")
    assert proc.returncode == 100
    assert message in proc.stderr.decode()


def test_a_ring_into_a_fifo_is_a_write_error_not_a_hang(tmp_path):
    """A ring is rewritten in place: a FIFO planted as stdout.log gets nothing, write_error."""
    cap_dir = tmp_path / "cap"
    cap_dir.mkdir()
    fifo = cap_dir / "stdout.log"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, so opening it for writing succeeds
    try:
        command = child_command("p.write_all(1, p.block(5, 3000))")
        _, events = run_checked(
            tmp_path, "--capture-dir", cap_dir, "--capture-keep", "tail", "--no-echo", command=command, returncode=0
        )
        assert os.read(reader, 1) == b""  # the runner closed its end without writing
    finally:
        os.close(reader)
    stream = one(events, "output_captured")["stdout"]
    assert (stream["bytes_seen"], stream["bytes_written"], stream["write_error"]) == (3000, 0, True)


def test_the_api_keyword_and_its_kept_ranges(tmp_path):
    import processkit

    results = {}
    for keep in MODES:
        cap_dir = tmp_path / keep
        result = processkit.run(
            ["seq", "1", "1000"], capture_dir=str(cap_dir), capture_max_bytes=CAP, capture_keep=keep, check=True
        )
        results[keep] = result.stdout_capture
        produced = "".join(f"{n}\n" for n in range(1, 1001)).encode()
        assert (cap_dir / "stdout.log").read_bytes() == kept_slice(produced, CAP, keep)
        assert result.stdout_capture.sha256 == sha256sum(cap_dir / "stdout.log")
    assert results["head"].kept == ((0, CAP),)
    assert results["tail"].kept == ((3893 - CAP, 3893),)
    assert results["head-tail"].kept == ((0, CAP // 2), (3893 - CAP // 2, 3893))
    assert results["tail"].stream == "stdout" and results["tail"].truncated is True


def test_a_record_left_by_another_run_is_not_applied(tmp_path):
    """A head run in a directory a tail run used: its capture reads as the head it is."""
    import processkit

    cap_dir = tmp_path / "cap"
    processkit.run(["seq", "1", "1000"], capture_dir=str(cap_dir), capture_max_bytes=CAP, capture_keep="tail")
    assert (cap_dir / "capture-keep.json").exists()
    result = processkit.run(["seq", "1", "1000"], capture_dir=str(cap_dir), capture_max_bytes=CAP)
    assert result.stdout_capture.kept == ((0, CAP),)


@pytest.mark.parametrize("keep", MODES)
def test_the_report_page_shows_the_right_end_and_what_was_dropped(tmp_path, keep):
    cap_dir = tmp_path / "cap"
    jsonl = tmp_path / "run.jsonl"
    args = ("--capture-dir", cap_dir, "--capture-max-bytes", "200", "--capture-keep", keep, "--no-echo")
    run_cli("run", "--jsonl", jsonl, *args, "--", "seq", "1", "100000")
    page = tmp_path / "page.html"
    proc = run_cli("report", jsonl, "-o", page)
    assert proc.returncode == 0, proc.stderr
    html = page.read_text()
    stdout_tail = html[html.index('data-stream="stdout"') :]
    stdout_tail = stdout_tail[: stdout_tail.index("</pre>")]
    dropped = len("".join(f"{n}\n" for n in range(1, 100001))) - 200
    if keep == "head":
        assert "\n35\n" in stdout_tail and "100000" not in stdout_tail
        assert "the stream&#39;s last" in html
    else:
        assert stdout_tail.rstrip().endswith("100000")
        assert "99999\n100000" in stdout_tail
    if keep == "tail":
        assert "the stream&#39;s first" in html and "are not in the file" in html
    if keep == "head-tail":
        assert '<span class="gap">' in stdout_tail
        before, after = stdout_tail.split('<span class="gap">')
        assert "\n35\n" in before and "99999" in after
        assert "of the stream are not in the file, after its first 100 B" in html
    assert "the file&#39;s SHA-256 matches" in html
    assert f"{dropped / 1024:.1f} KiB" in html


def test_events_says_which_part_each_file_kept(tmp_path):
    words = {}
    for keep in MODES:
        jsonl = tmp_path / f"{keep}.jsonl"
        args = ("--capture-dir", tmp_path / keep, "--capture-max-bytes", "200", "--capture-keep", keep)
        run_cli("run", "--jsonl", jsonl, *args, "--no-echo", "--", "seq", "1", "1000")
        lines = run_cli("events", "--file", jsonl).stdout.decode().splitlines()
        words[keep] = next(line for line in lines if "output_captured" in line)
    assert "(truncated, kept 200 B)" in words["head"]
    assert "(truncated, kept the last 200 B)" in words["tail"]
    assert "(truncated, kept the first 100 B and the last 100 B)" in words["head-tail"]


def test_events_read_from_elsewhere_still_says_a_tail_was_kept(tmp_path):
    """An agent runs ``--capture-dir cap`` (relative) in its project and reads the stream back
    with ``events --file`` from another directory: the line said "kept 200 B", which the docs
    read as a head capture, for a file holding the stream's end (the record was looked for from
    the reader's directory, not the run's)."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    args = ("--capture-dir", "cap", "--capture-max-bytes", "200", "--capture-keep", "tail", "--no-echo")
    run_cli("run", "--jsonl", "run.jsonl", *args, "--", "seq", "1", "1000", cwd=project)
    lines = run_cli("events", "--file", project / "run.jsonl", cwd=elsewhere).stdout.decode().splitlines()
    assert "(truncated, kept the last 200 B)" in next(line for line in lines if "output_captured" in line)


def test_the_runs_warning_says_which_part_each_file_kept(tmp_path, pump_backend):
    """``run``'s warning of a cut said "holds 200 of its 3893 bytes" whatever the mode, where
    ``events`` says "kept the last 200 B": an agent reading stderr took a tail's file for the
    stream's first 200 bytes. The warning (and the API's, from the same words) now says which."""
    import processkit

    said = {}
    for keep in MODES:
        args = ("--capture-dir", tmp_path / keep, "--capture-max-bytes", "200", "--capture-keep", keep)
        done = run_cli("run", "--jsonl", tmp_path / f"{keep}.jsonl", *args, "--no-echo", "--", "seq", "1", "1000")
        assert done.returncode == 0, done.stderr
        said[keep] = done.stderr.decode()
    prefix = "processkit-cli: warning: stdout's capture was cut at --capture-max-bytes: "
    assert f"{prefix}{tmp_path / 'head' / 'stdout.log'} holds 200 of its 3893 bytes\n" == said["head"]
    assert f"{prefix}{tmp_path / 'tail' / 'stdout.log'} holds the last 200 of its 3893 bytes\n" == said["tail"]
    both = f"{tmp_path / 'head-tail' / 'stdout.log'} holds the first 100 and the last 100 of its 3893 bytes\n"
    assert f"{prefix}{both}" == said["head-tail"]
    with pytest.warns(processkit.CaptureTruncated, match="holds the last 200 of its 3893 bytes"):
        processkit.run(["seq", "1", "1000"], capture_dir=tmp_path / "api", capture_keep="tail", capture_max_bytes=200)


@pytest.mark.parametrize("planted", ["symlink", "other-user", "hard-link", "hard-link-marks"])
def test_the_layout_record_never_lands_in_a_planted_file(tmp_path, planted):
    """A symlink, or another user's file, at capture-keep.json (or its marks): left as it is, a
    warning, the run and its captures unaffected. A hard link to a file of this user's is what
    another user can plant in a shared capture directory (``/tmp`` itself, sticky, root's) where
    ``fs.protected_hardlinks`` is off; here this user makes it, as that user could there (the
    victim was emptied and overwritten with the record, or with the marks' 96 bytes): the
    record is a fresh file renamed over that name, the victim untouched."""
    cap_dir = tmp_path / "cap"
    cap_dir.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    record = cap_dir / "capture-keep.json"
    if planted == "symlink":
        record.symlink_to(victim)
    elif planted.startswith("hard-link"):
        os.chmod(cap_dir, 0o1777)
        os.link(victim, cap_dir / ("capture-keep.marks" if planted == "hard-link-marks" else "capture-keep.json"))
    else:
        if os.geteuid() != 0:
            pytest.skip("needs root to give the file to another user")
        record.write_text("keep me\n")
        os.chown(record, 65534, 65534)
        victim = record
    command = child_command("p.write_all(1, p.block(6, 3000))")
    args = ("--capture-dir", cap_dir, "--capture-max-bytes", "1000", "--capture-keep", "tail", "--no-echo")
    proc, events = run_checked(tmp_path, *args, command=command, returncode=0)
    assert victim.read_text() == "keep me\n"
    if planted.startswith("hard-link"):
        assert b"could not" not in proc.stderr, proc.stderr
        assert json.loads(record.read_text())["keep"] == "tail"
    else:
        assert b"could not record which" in proc.stderr
    assert (cap_dir / "stdout.log").read_bytes() == block(6, 3000)[-1000:]


def test_a_record_with_another_name_of_the_users_own_is_replaced_not_refused(tmp_path):
    """``cp -al cap bak`` gives the record a second name (the user's own backup): the next tail
    run into ``cap`` writes its record, read as the tail it is, and the backup keeps the old one
    (refused, the tail capture was read back as a head)."""
    cap_dir, backup = tmp_path / "cap", tmp_path / "bak"
    args = ("--capture-dir", cap_dir, "--capture-max-bytes", str(CAP), "--capture-keep", "tail", "--no-echo")
    for n, run_id in enumerate(("first", "second")):
        proc = run_cli(
            "run", "--run-id", run_id, "--jsonl", tmp_path / f"{run_id}.jsonl", *args, "--", "seq", "1", str(1000 + n)
        )
        assert proc.returncode == 0 and b"could not" not in proc.stderr, proc.stderr
        if run_id == "first":
            subprocess.run(["cp", "-al", str(cap_dir), str(backup)], check=True)
    assert json.loads((backup / "capture-keep.json").read_text())["run_id"] == "first"
    record = json.loads((cap_dir / "capture-keep.json").read_text())
    assert record["run_id"] == "second" and record["keep"] == "tail", record
    page = tmp_path / "page.html"
    assert run_cli("report", tmp_path / "second.jsonl", "-o", page).returncode == 0
    assert "the stream&#39;s first" in page.read_text()  # read as a tail: its first bytes were dropped


@pytest.mark.skipif(not os.path.exists("/usr/bin/time"), reason="GNU time measures the runner's own peak")
def test_a_tail_bigger_than_the_memory_bound_is_kept_in_bounded_memory(tmp_path, pump_backend):
    """256 MiB through a 64 MiB tail: the runner's peak RSS stays under issue 28's 40 MiB, so the
    ring cannot be in memory (GNU time is a small C parent: its figure is the runner's own)."""
    cap_dir = tmp_path / "cap"
    jsonl = tmp_path / "run.jsonl"
    args = ("--capture-dir", cap_dir, "--capture-max-bytes", "64m", "--capture-keep", "tail", "--no-echo")
    command = ["head", "-c", str(256 << 20), "/dev/zero"]
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *map(str, cli_command()), "run", "--jsonl", jsonl, *args, "--", *command],
        capture_output=True,
    )
    assert proc.returncode == 0, proc.stderr
    peak_kib = int(proc.stderr.decode().split()[-1])
    assert peak_kib < 40 << 10
    stream = json.loads(jsonl.read_text().splitlines()[-2])["stdout"]
    assert (stream["bytes_seen"], stream["bytes_written"]) == (256 << 20, 64 << 20)
    assert stream["sha256"] == hashlib.sha256(bytes(64 << 20)).hexdigest()
