"""The cgroup files a run reads: none whose figures an earlier counter gave, and the per-process
facts (the v1 groups this process is in, the v2 parent's accounting switched on) found once."""

from __future__ import annotations

from processkit.containment import cgroup_v1, cgroup_v2, cgroupfs
from processkit.containment.accounting import Tally

MiB = 1024 * 1024


def v2_usage(group, tally=None):
    """What a v2 group whose files are ``group``'s gives (a fake group), after what ``tally``
    already holds."""
    container = cgroup_v2.CgroupV2.__new__(cgroup_v2.CgroupV2)
    container.path = str(group)
    tally = Tally() if tally is None else tally
    container._account(tally)
    return tally.usage()


def test_a_v2_group_reads_no_file_whose_figures_v1_gave(tmp_path):
    group = tmp_path / "run"
    group.mkdir()  # no cpu.stat, memory.peak or pids.peak: reading one would raise
    (group / "memory.events").write_text("oom_kill 0\n")
    (group / "io.stat").write_text("254:0 rbytes=4096 wbytes=8192\n")
    tally = Tally()
    for field in ("cpu_ns", "user_ns", "system_ns"):
        tally.offer_ns(field, 5_000_000, "v1")
    tally.offer("peak_memory_bytes", 3 * MiB, "v1")
    tally.offer("peak_process_count", 1, "v1")
    usage = v2_usage(group, tally)
    assert (usage.total_cpu_ms, usage.peak_memory_bytes, usage.io_read_bytes, usage.io_write_bytes) == (
        5,
        3 * MiB,
        4096,
        8192,
    )
    assert usage.sources["peak_memory_bytes"] == "v1" and usage.sources["io_read_bytes"] == "io.stat rbytes (v2)"


def test_a_v2_group_still_gives_the_cpu_split_v1_lacks(tmp_path):
    group = tmp_path / "run"
    group.mkdir()
    (group / "cpu.stat").write_text("usage_usec 9000\nuser_usec 6000\nsystem_usec 3000\n")
    tally = Tally()
    tally.offer_ns("cpu_ns", 10_000_000, "cpuacct.usage (v1)")  # the total only: the split comes from v2
    usage = v2_usage(group, tally)
    assert (usage.total_cpu_ms, usage.user_cpu_ms, usage.system_cpu_ms) == (10, 6, 3)
    assert usage.sources["user_ns"] == "cpu.stat user_usec (v2)"


def test_this_processs_v1_groups_are_found_once(monkeypatch):
    monkeypatch.delenv("PROCESSKIT_CGROUP_V1_ROOT", raising=False)
    first = cgroup_v1.own_groups()
    reads = []
    real = cgroupfs.read_text
    monkeypatch.setattr(cgroupfs, "read_text", lambda path: reads.append(path) or real(path))
    assert cgroup_v1.own_groups() == first
    assert reads == ([] if first else ["/proc/self/cgroup"])


def test_one_key_of_a_flat_keyed_file_reads_alike_from_a_directory_and_held_files(tmp_path):
    """``cgroupfs.key_in``: the one reader of a single count a run's end needs (v1's OOM kills,
    v2's ``populated``), by its whole key (``oom_kill_disable`` is not ``oom_kill``), None
    where the file has no such line."""
    group = tmp_path / "run"
    group.mkdir()
    (group / "memory.oom_control").write_text("oom_kill_disable 1\nunder_oom 0\noom_kill 7\n")
    (group / "memory.events").write_text("oom 2\n")
    held = cgroupfs.HeldFiles(str(group))
    try:
        for where in (str(group), held):
            assert cgroupfs.key_in(where, "memory.oom_control", "oom_kill") == 7
            assert cgroupfs.key_in(where, "memory.oom_control", "oom_kill_disable") == 1
            assert cgroupfs.key_in(where, "memory.events", "oom_kill") is None
    finally:
        held.close()


def test_a_held_file_is_read_whole_whatever_its_length_with_a_small_first_read(tmp_path, monkeypatch):
    """A lent group's counters are read with a first ``pread`` the interpreter's small-object
    allocator serves (``cgroupfs.FIRST_READ``), not a ``READ_CHUNK`` buffer each; a file that
    fills it is read whole again from its start, in one read, never stitched from two."""
    import os

    sizes: list[int] = []
    real_pread = os.pread

    def counted(fd, size, offset):
        sizes.append(size)
        return real_pread(fd, size, offset)

    monkeypatch.setattr(os, "pread", counted)
    lengths = (0, 12, cgroupfs.FIRST_READ - 1, cgroupfs.FIRST_READ, cgroupfs.FIRST_READ + 1, 3000)
    for length in lengths:
        (tmp_path / f"f{length}").write_bytes(bytes(48 + n % 10 for n in range(length)))
    files = cgroupfs.HeldFiles(str(tmp_path))
    try:
        for length in lengths:
            sizes.clear()
            content = files.content(f"f{length}")
            assert content == (tmp_path / f"f{length}").read_bytes()
            assert sizes[0] == cgroupfs.FIRST_READ < cgroupfs.READ_CHUNK
            assert sizes[1:] == ([] if length < cgroupfs.FIRST_READ else [cgroupfs.READ_CHUNK])
    finally:
        files.close()
