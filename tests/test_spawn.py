"""Starting the child: the native spawn (clone3 in C) and the Popen fallback behave the same.

Every test runs once per path (``PROCESSKIT_SPAWN``) and looks at the child from inside it:
its argv bytes, environment, cwd, signal state, fds, process group and cgroups, and what the
runner reports when it cannot be started.
"""

from __future__ import annotations

import errno
import os
import posixpath
import signal
import time

import pytest

from processkit import spawn_words

from conftest import SAFETY_NET, pid_alive, read_events, run_cli, start_cli, wait_for_file
from streams import one, python_child, require_mechanism, run_checked

ATTACH_PREFIX = "cannot join the child to the process_group container"


def status_mask(text: str, field: str) -> int:
    """A signal bit mask (``SigIgn``, ``SigBlk``) from a /proc/<pid>/status text."""
    line = next(line for line in text.splitlines() if line.startswith(field + ":"))
    return int(line.split()[1], 16)


def bit(signum: int) -> int:
    return 1 << (signum - 1)


def spawn_failure(tmp_path, *args, command, frame="could not start the program: ", **kwargs) -> str:
    """Run a command that cannot start: 101, a ``spawn_failed`` event; returns its message,
    which stderr's line says in the reference's frame (a bad ``--cwd``'s in none)."""
    proc, events = run_checked(tmp_path, *args, command=command, returncode=101, **kwargs)
    assert [e["event"] for e in events] == ["spawn_failed", "runner_exit"]
    message = one(events, "spawn_failed")["message"]
    assert proc.stderr.decode().strip() == f"processkit-cli: {frame}{message}"
    return message


# -- what the child is given -------------------------------------------------------------------


def test_argv_reaches_the_child_byte_exact(tmp_path, spawn_backend):
    words = [b"caf\xe9", b"\xff\xfe\x80", b"", b"two words", "ü".encode(), b"-x", b"back\\slash"]
    echo = "import os, sys; sys.stdout.buffer.write(b'\\0'.join(os.fsencode(a) for a in sys.argv[1:]))"
    proc, _ = run_checked(tmp_path, command=python_child(echo) + [os.fsdecode(w) for w in words], returncode=0)
    assert proc.stdout == b"\0".join(words)


def test_the_program_is_found_on_the_path_of_the_childs_environment(tmp_path, spawn_backend):
    """Not the runner's PATH; a candidate that cannot be run does not stop the search."""
    blocked, good = tmp_path / "blocked", tmp_path / "good"
    for directory, mode in ((blocked, 0o644), (good, 0o755)):
        directory.mkdir()
        program = directory / "pk-spawn-probe"
        program.write_text(f'#!/bin/sh\necho from {directory.name} "$PK_VALUE"\n')
        program.chmod(mode)
    path = f"{blocked}:{good}:/usr/bin:/bin"
    proc, _ = run_checked(
        tmp_path, "--env", f"PATH={path}", "--env", "PK_VALUE=v=1 ü", command=["pk-spawn-probe"], returncode=0
    )
    assert proc.stdout == "from good v=1 ü\n".encode()


def test_without_a_path_the_program_is_searched_in_the_default_path(tmp_path, spawn_backend):
    """A child environment with no PATH (``--env-clear``) is searched along ``os.defpath``, as
    execvp does; an empty search list would find nothing."""
    assert "/bin" in os.defpath.split(os.pathsep)
    proc, _ = run_checked(tmp_path, "--env-clear", command=["echo", "found"], returncode=0)
    assert proc.stdout == b"found\n"


def test_a_program_only_blocked_on_the_path_is_not_executable(tmp_path, spawn_backend):
    """The EACCES met first is the error, not the ENOENT of the directories searched after."""
    (tmp_path / "blocked").mkdir()
    (tmp_path / "blocked" / "pk-spawn-probe").write_text("#!/bin/sh\n")
    path = f"{tmp_path / 'blocked'}:{tmp_path / 'missing'}"
    message = spawn_failure(tmp_path, "--env", f"PATH={path}", command=["pk-spawn-probe"])
    assert message == "could not start `pk-spawn-probe`: Permission denied (os error 13)"


def test_the_child_starts_in_cwd(tmp_path, spawn_backend):
    (tmp_path / "sub").mkdir()
    proc, _ = run_checked(tmp_path, "--cwd", "sub", command=["pwd", "-P"], returncode=0, cwd=tmp_path)
    assert proc.stdout.decode().strip() == str((tmp_path / "sub").resolve())


def _elf_without_its_loader(path) -> bool:
    """A copy of ``/bin/true`` whose loader (PT_INTERP) names a file that is not there: its
    exec fails ENOENT. False where the loader's name is not found to change."""
    data = open("/bin/true", "rb").read()
    interp = next((n for n in (b"/lib64/ld-linux-x86-64.so.2", b"/lib/ld-linux-aarch64.so.1") if n in data), None)
    if interp is None:
        return False
    path.write_bytes(data.replace(interp, b"/no/such/" + b"x" * (len(interp) - 9), 1))
    path.chmod(0o755)
    return True


@pytest.mark.parametrize(
    "case, expected",
    [
        ("missing", "`{program}` not found"),
        ("missing_on_path", "`{program}` not found on PATH"),
        ("not_executable", "could not start `{program}`: Permission denied (os error 13)"),
        ("directory", "could not start `{program}`: Permission denied (os error 13)"),
        ("no_interpreter", "`{program}` not found"),
        ("no_interpreter_relative", "`{program}` not found"),
        ("dangling_link", "`{program}` not found"),
        ("no_loader", "`{program}` not found"),
        ("no_interpreter_on_path", "could not start `{program}`: No such file or directory (os error 2)"),
        ("dangling_link_on_path", "`{program}` not found on PATH"),
        ("missing_on_the_childs_path", "`{program}` not found on PATH"),
        ("missing_without_a_path", "`{program}` not found on PATH"),
        ("exec_format", "could not start `{program}`: Exec format error (os error 8)"),
        ("bad_cwd", "cannot use --cwd {cwd}: No such file or directory"),
    ],
)
def test_a_child_that_cannot_start_is_a_spawn_error(tmp_path, spawn_backend, case, expected):
    """The reference's words (ProcessKit's error text): an ENOENT of a program given as a path is
    "not found" whatever the file is (a script's missing interpreter, a dangling link, an ELF's
    missing loader); of a bare name, "not found on PATH" unless the child's PATH holds it as an
    executable file (followed links), whatever PATH the child was given. One the OS refused
    otherwise: its words and number. Both spawns say the same."""
    program, args, frame = "true", [], "could not start the program: "
    bin_dir, script = tmp_path / "bin", tmp_path / "plain-file"
    bin_dir.mkdir()
    if case == "missing":
        program = str(tmp_path / "no-such-program")
    elif case in ("missing_on_path", "missing_on_the_childs_path", "missing_without_a_path"):
        program = "pk-no-such-program-on-path"
        args = {"missing_on_the_childs_path": ["--env", f"PATH={bin_dir}"], "missing_without_a_path": ["--env-clear"]}
        args = args.get(case, [])
    elif case in ("not_executable", "no_interpreter", "no_interpreter_relative", "exec_format"):
        program = str(script) if case != "no_interpreter_relative" else "./plain-file"
        script.write_bytes(b"\x7fELF-not-really" if case == "exec_format" else b"#!/no/such/sh\n")
        script.chmod(0o644 if case == "not_executable" else 0o755)
    elif case in ("no_interpreter_on_path", "dangling_link_on_path"):
        program = "pk-spawn-probe"
        if case == "no_interpreter_on_path":
            (bin_dir / program).write_bytes(b"#!/no/such/sh\n")
            (bin_dir / program).chmod(0o755)
        else:
            (bin_dir / program).symlink_to(tmp_path / "nowhere")
        args = ["--env", f"PATH={bin_dir}"]
    elif case == "dangling_link":
        program = str(tmp_path / "dangling")
        (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    elif case == "no_loader":
        program = str(tmp_path / "no-loader")
        if not _elf_without_its_loader(tmp_path / "no-loader"):
            pytest.skip("no known loader name in /bin/true")
    elif case == "directory":
        program = str(tmp_path)
    cwd = tmp_path / "no-such-dir"
    if case == "bad_cwd":
        args, frame = ["--cwd", cwd], ""
    message = spawn_failure(tmp_path, *args, command=[program], frame=frame, cwd=tmp_path)
    assert message == expected.format(program=program, cwd=cwd)


def test_a_program_name_with_no_bytes_is_still_named():
    """A lone surrogate that is no undecoded byte (U+D800) has no bytes for ``os.fsencode``: the
    spawn's error handler (a lone surrogate's failure) names the program all the same, not raise."""
    assert spawn_words.named("pk-\ud800") == "`pk-?`"
    assert spawn_words.named("pk-\udcff") == "`pk-\ufffd`"


@pytest.mark.parametrize("argv_raw", [False, True], ids=["redacted", "argv-raw"])
def test_a_spawn_failure_names_the_program_and_none_of_its_arguments(tmp_path, spawn_backend, argv_raw):
    """The reference's ``spawn_failed.message`` is ProcessKit's error, which names argv[0] with or
    without ``--argv-raw`` (only ``run_started.command`` is redacted); an argument is never named."""
    program = str(tmp_path / "no-such-s3cr3t-program")
    args = ["--argv-raw"] if argv_raw else []
    message = spawn_failure(tmp_path, *args, command=[program, "--token=arg-s3cr3t"])
    assert message == f"`{program}` not found"


def test_a_shell_line_given_as_the_program_gets_a_hint_in_human_form_only(tmp_path):
    """``run -- 'make test'``: the reference's line, then a hint naming the way out (batch's
    closing says it too); ``--error-format json`` keeps its one envelope line; a bare name with
    no space, no hint."""
    jsonl = tmp_path / "events.jsonl"
    human = run_cli("run", "--jsonl", jsonl, "--", "pk-no-such make test", cwd=tmp_path)
    lines = human.stderr.decode().splitlines()
    assert human.returncode == 101
    assert lines == [
        "processkit-cli: could not start the program: `pk-no-such make test` not found on PATH",
        spawn_words.SHELL_LINE_HINT,
    ]
    envelope = run_cli("run", "--error-format", "json", "--jsonl", jsonl, "--", "pk-no-such make test", cwd=tmp_path)
    assert envelope.returncode == 101 and len(envelope.stderr.decode().splitlines()) == 1
    plain = run_cli("run", "--jsonl", jsonl, "--", "pk-no-such-make", cwd=tmp_path)
    assert len(plain.stderr.decode().splitlines()) == 1
    # a path among its words ('pytest tests/unit'): not found as a path, the same hint (batch's test)
    with_path = run_cli("run", "--jsonl", jsonl, "--", "pk-no-such tests/unit", cwd=tmp_path)
    assert with_path.stderr.decode().splitlines() == [
        "processkit-cli: could not start the program: `pk-no-such tests/unit` not found",
        spawn_words.SHELL_LINE_HINT,
    ]
    # a path as its first word is a program with spaces in its name: no hint
    named_path = run_cli("run", "--jsonl", jsonl, "--", "./pk no-such", cwd=tmp_path)
    assert len(named_path.stderr.decode().splitlines()) == 1


def test_bench_command_and_a_detached_run_give_a_hint_for_a_shell_line(tmp_path):
    """``bench --command '["make test"]'`` and ``run --detach -- 'make test'`` relay the spawn's
    words in their own line: a hint follows it (human form only), as in the foreground; a
    program of one word, none. bench's names bench's own ways out (``--command`` split into
    words, or the line as a COMMAND the shell runs): it gave run's (``-- sh -c 'LINE'``)."""
    hint = spawn_words.SHELL_LINE_HINT
    for given in (["--command", '["pk-no-such make test"]'], ["--", "pk-no-such make test"]):
        bench = run_cli("bench", "--runs", "2", *given, cwd=tmp_path)
        said = bench.stderr.decode().splitlines()[1:]
        assert bench.returncode == 118 and len(said) == 1, bench.stderr
        assert said[0].startswith("hint: ") and """--command '["PROGRAM", "ARG"]'""" in said[0], said
        assert "bench 'LINE'" in said[0] and "sh -c" not in said[0], said
    one_word = run_cli("bench", "--runs", "2", "--command", '["pk-no-such-make"]', cwd=tmp_path)
    assert one_word.returncode == 118 and len(one_word.stderr.decode().splitlines()) == 1, one_word.stderr
    detached = run_cli("run", "--detach", "--jsonl", tmp_path / "d.jsonl", "--", "pk-no-such make test", cwd=tmp_path)
    lines = detached.stderr.decode().splitlines()
    assert detached.returncode == 101 and lines[0].endswith("`pk-no-such make test` not found on PATH"), lines
    assert lines[1:] == [hint]
    quiet = run_cli("run", "--detach", "--error-format", "json", "--jsonl", tmp_path / "e.jsonl", "--",
                    "pk-no-such make test", cwd=tmp_path)  # fmt: skip
    assert quiet.returncode == 101 and len(quiet.stderr.decode().splitlines()) == 1, quiet.stderr


# -- the child's process state -----------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGPIPE, signal.SIGXFSZ], ids=["SIGPIPE", "SIGXFSZ"])
def test_signals_python_ignores_are_default_again_in_the_child(tmp_path, spawn_backend, signum):
    """The runner (Python) ignores them; a child gets them at their default, as from Popen."""
    proc, events = run_checked(tmp_path, command=["sh", "-c", f"kill -{int(signum)} $$; echo survived"])
    assert proc.stdout == b""
    assert one(events, "root_exited")["signal"] == signum
    assert proc.returncode == 128 + signum


def test_a_writer_to_a_closed_pipe_dies_of_sigpipe(tmp_path, spawn_backend):
    """``yes | head -n1``: yes dies of SIGPIPE (141) instead of failing its write (1)."""
    proc, _ = run_checked(tmp_path, command=["sh", "-c", "(yes; echo $? >&2) | head -n1 >/dev/null"], returncode=0)
    assert proc.stderr == f"{128 + signal.SIGPIPE}\n".encode()


def test_signal_state_the_child_inherits(tmp_path, spawn_backend):
    """An empty mask whatever the runner inherited; an ignored signal stays ignored (nohup)."""

    def ignore_and_block():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGQUIT})

    with open("/proc/self/status") as handle:
        ours = status_mask(handle.read(), "SigIgn")  # this test's own start may ignore more
    proc, _ = run_checked(tmp_path, command=["cat", "/proc/self/status"], returncode=0, preexec_fn=ignore_and_block)
    status = proc.stdout.decode()
    assert status_mask(status, "SigBlk") == 0
    caught_by_the_runner_or_python = bit(signal.SIGCHLD) | bit(signal.SIGPIPE) | bit(signal.SIGXFSZ)
    expected = (ours | bit(signal.SIGTERM) | bit(signal.SIGUSR2)) & ~caught_by_the_runner_or_python
    assert status_mask(status, "SigIgn") == expected


def test_the_child_has_its_stdio_and_the_callers_fds_only(tmp_path, spawn_backend):
    """The runner's own fds do not reach the child; one its caller passed it does, under its
    number, as the reference's (processkit/caller_fds.py)."""
    passed = os.open(tmp_path, os.O_RDONLY)
    os.set_inheritable(passed, True)
    listing = (
        "import os\n"
        "listed = os.listdir('/proc/self/fd')\n"  # the listing's own fd is closed again below
        "print(sorted(int(fd) for fd in listed if os.path.exists(f'/proc/self/fd/{fd}')))\n"
        "print([os.readlink(f'/proc/self/fd/{fd}').split(':')[0] for fd in (0, 1, 2)])"
    )
    try:
        proc, _ = run_checked(tmp_path, command=python_child(listing), returncode=0, pass_fds=[passed])
    finally:
        os.close(passed)
    assert proc.stdout.decode().splitlines() == [f"[0, 1, 2, {passed}]", "['/dev/null', 'pipe', 'pipe']"]


def test_stdin_from_a_file_is_a_pipe_fed_by_the_runner(tmp_path, spawn_backend):
    source = tmp_path / "in.bin"
    source.write_bytes(b"\x00fed\xff")
    proc, _ = run_checked(tmp_path, "--stdin-file", source, command=["cat"], returncode=0)
    assert proc.stdout == b"\x00fed\xff"


def test_the_child_leads_its_own_process_group(tmp_path, spawn_backend):
    report = "import os; print(os.getpid(), os.getpgrp(), os.getsid(0) == os.getsid(os.getppid()))"
    proc, events = run_checked(tmp_path, command=python_child(report), returncode=0)
    pid, pgid, same_session = proc.stdout.decode().split()
    assert int(pid) == int(pgid) == one(events, "run_started")["root_pid"]
    assert same_session == "True"


def cgroups(text: str) -> dict[str, str]:
    """Controller (``""`` for cgroup v2) -> group path, from a /proc/<pid>/cgroup text."""
    found = {}
    for line in text.splitlines():
        _, names, path = line.split(":", 2)
        found.update(dict.fromkeys(names.split(","), path))
    return found


@pytest.mark.parametrize("caps", [[], ["--max-memory", "1g"]], ids=["uncapped", "capped"])
def test_the_child_is_in_the_runs_cgroups_before_exec(tmp_path, spawn_backend, caps):
    """The program's first act reads its cgroups: it is already in the run's own groups (and,
    where a cap is carried by cgroup v1, in that hierarchy's run group too)."""
    proc, events = run_checked(tmp_path, *caps, command=["cat", "/proc/self/cgroup"], returncode=0)
    require_mechanism(events, "cgroup_v2")
    with open("/proc/self/cgroup") as handle:
        ours = cgroups(handle.read())
    theirs = cgroups(proc.stdout.decode())
    parent, name = posixpath.split(theirs[""])
    assert parent == ours[""] and name.startswith("processkit-")
    if caps and theirs.get("memory") is not None:
        assert theirs["memory"] == posixpath.join(ours["memory"], name)


def v1_hierarchy(controller: str) -> str | None:
    """The mount point of ``controller``'s cgroup v1 hierarchy, or None."""
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split()
            dash = fields.index("-")
            if fields[dash + 1] == "cgroup" and controller in fields[dash + 3].split(","):
                return fields[4]
    return None


def test_a_failed_cgroup_join_is_a_container_error(tmp_path, spawn_backend, monkeypatch):
    """A cap group the child cannot enter (a v1 cpuset with no CPUs: ENOSPC) fails the attach, said
    in the errno's words by either spawn (Popen's said only "Exception occurred in preexec_fn.")."""
    memory, cpuset = v1_hierarchy("memory"), v1_hierarchy("cpuset")
    if memory is None or cpuset is None or not (os.access(memory, os.W_OK) and os.access(cpuset, os.W_OK)):
        pytest.skip("needs writable cgroup v1 memory and cpuset hierarchies")
    root, not_a_cgroup = tmp_path / "v1", tmp_path / "plain"
    root.mkdir()
    not_a_cgroup.mkdir()
    (root / "memory").symlink_to(memory)  # carries the cap
    (root / "cpuacct").symlink_to(cpuset)  # an accounting group the child must join, but cannot
    monkeypatch.setenv("PROCESSKIT_CGROUP_PARENT", str(not_a_cgroup))  # caps go to cgroup v1
    monkeypatch.setenv("PROCESSKIT_CGROUP_V1_ROOT", str(root))
    groups_before = set(os.listdir(cpuset))
    _, events = run_checked(tmp_path, "--max-memory", "1g", command=["true"], returncode=102)
    failed = one(events, "container_failed")
    assert failed["phase"] == "attach" and failed["message"].startswith(ATTACH_PREFIX)
    assert failed["message"].endswith(f": {os.strerror(errno.ENOSPC)}"), failed["message"]
    assert [e["event"] for e in events] == ["container_failed", "runner_exit"]
    assert set(os.listdir(cpuset)) <= groups_before, "the run's cpuset group outlived the run"


def test_a_sigkilled_runner_takes_the_child_with_it(tmp_path, spawn_backend, monkeypatch):
    monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")  # no v2 group; v1 caps/accounting may be made
    jsonl, pid_file = tmp_path / "run.jsonl", tmp_path / "child.pid"
    hold = (
        f"import os, time; open({str(pid_file)!r} + '.tmp', 'w').write(str(os.getpid())); "
        f"os.replace({str(pid_file)!r} + '.tmp', {str(pid_file)!r}); time.sleep(60)"
    )
    runner = start_cli("run", "--jsonl", jsonl, "--", *python_child(hold))
    wait_for_file(pid_file)
    child = int(pid_file.read_text())
    runner.kill()
    runner.communicate(timeout=SAFETY_NET)
    deadline = time.monotonic() + 60
    while pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        assert not pid_alive(child), "the child outlived its SIGKILLed runner"
    finally:
        if pid_alive(child):
            os.kill(child, signal.SIGKILL)
    assert "runner_exit" not in [e["event"] for e in read_events(jsonl)]
    assert run_cli("prune").returncode == 0  # the SIGKILLed runner's groups (v1 accounting) swept now
