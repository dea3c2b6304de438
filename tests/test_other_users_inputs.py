"""Inputs a run reads on its child's behalf (threat59, attack a): ``--stdin-file`` and
``--env-file`` are read as the runner's user (often root) and handed to the child, whose output
may land where others read it. Another user's symbolic link at such a name in ``/tmp`` made root
read a file of root's (``/etc/shadow`` into the child's stdin, a secret ``KEY=VALUE`` file into
its environment), as ``fs.protected_symlinks`` (off on such a host) exists to stop. The name is
now walked as an output's is (``safepath``): another user's link at it is refused (111, naming
the link's owner), the user's own links, ``/dev/stdin`` and ``/dev/fd/N`` still work. With a
second OS user, as tests/test_other_users.py makes it."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from conftest import SAFETY_NET, read_events, run_cli
from test_other_users import as_other, other_user, refused, shared  # noqa: F401  (fixtures)

SECRET = b"ROOT_TOKEN=root-only-secret\n"


@pytest.fixture
def secret(tmp_path):
    """A file of root's, in a directory the attacker cannot enter."""
    path = tmp_path / "private" / "secret.env"
    path.parent.mkdir(mode=0o700)
    path.write_bytes(SECRET)
    return path


# Each input's setup failure, in the reference's words.
SAID = {"--stdin-file": "could not open stdin file", "--env-file": "could not read environment file"}


@pytest.mark.parametrize("flag", ["--stdin-file", "--env-file"])
def test_another_users_link_at_an_input_is_not_followed(tmp_path, other_user, shared, secret, flag):  # noqa: F811
    planted = os.path.join(shared, "input")
    as_other(other_user, 'ln -s "$2" "$1"', planted, secret)
    capture = tmp_path / "cap"
    result = run_cli(
        "run", "--jsonl", tmp_path / "run.jsonl", "--capture-dir", capture, flag, planted, "--",
        "sh", "-c", 'cat; echo "token=$ROOT_TOKEN"',
    )  # fmt: skip
    refused(result, SAID[flag], "symbolic link of uid")
    assert b"root-only-secret" not in result.stdout
    assert not (capture / "stdout.log").exists() or b"root-only-secret" not in (capture / "stdout.log").read_bytes()
    assert read_events(tmp_path / "run.jsonl")[-1]["code"] == 111


# The API's keyword, the run it makes, and the caller's stream another user's link leads to.
API_LINKS = {
    "stdin_file": ('["cat"], stdin_file=planted, capture_output=True', "/dev/stdin"),
    "env_file": ('["sh", "-c", "echo $ROOT_TOKEN"], env_file=[planted], capture_output=True', "/dev/stdin"),
    "jsonl": ('["true"], jsonl=planted', "/dev/stdout"),
}
API_SAID = {"stdin_file": SAID["--stdin-file"], "env_file": SAID["--env-file"], "jsonl": "could not open the JSONL"}


API_SCRIPT = """
import sys, processkit
planted = sys.argv[1]
done = processkit.run({run})
print(done.returncode, done.stdout, done.diagnostics, file=sys.stderr)
"""


@pytest.mark.parametrize("keyword", list(API_LINKS))
def test_the_api_refuses_another_users_link_to_the_callers_stream(tmp_path, other_user, shared, secret, keyword):  # noqa: F811
    """The API follows a link to the caller's ``/dev/stdin`` (``/dev/stdout``) in the caller, as
    the service would reach its own /dev/null; another user's link there is refused as the CLI
    refuses it (111, naming the owner), not followed because of where it leads: the caller's
    stdin (a secret of root's) read into the child, its stdout taking the run's events."""
    run, stream = API_LINKS[keyword]
    planted = os.path.join(shared, "input")
    as_other(other_user, 'ln -s "$2" "$1"', planted, stream)
    with open(secret, "rb") as stdin, open(tmp_path / "out", "wb") as stdout:
        done = subprocess.run(
            [sys.executable, "-c", API_SCRIPT.format(run=run), planted], stdin=stdin, stdout=stdout,
            stderr=subprocess.PIPE, cwd=tmp_path, timeout=SAFETY_NET,
        )  # fmt: skip
    said = done.stderr.decode()
    captured = "b''" if "capture_output" in run else "None"  # none started: empty where captured
    assert said.startswith(f"111 {captured} "), said
    assert API_SAID[keyword] in said and "symbolic link of uid" in said, said
    assert b"root-only-secret" not in done.stderr
    assert (tmp_path / "out").read_bytes() == b""


@pytest.mark.parametrize("flag", ["--stdin-file", "--env-file"])
def test_ones_own_link_and_descriptors_still_feed_an_input(tmp_path, shared, secret, flag):  # noqa: F811
    mine = os.path.join(shared, "mine")
    os.symlink(secret, mine)
    command = ["sh", "-c", 'cat; echo "token=$ROOT_TOKEN"']
    result = run_cli("run", "--jsonl", tmp_path / "a.jsonl", flag, mine, "--", *command)
    assert result.returncode == 0, result.stderr
    assert b"root-only-secret" in result.stdout
    with open(secret, "rb") as handle:
        given = run_cli(
            "run", "--jsonl", tmp_path / "b.jsonl", flag, f"/dev/fd/{handle.fileno()}", "--", *command,
            pass_fds=(handle.fileno(),),
        )  # fmt: skip
    assert given.returncode == 0, given.stderr
    assert b"root-only-secret" in given.stdout


@pytest.mark.parametrize("flag", ["--stdin-file", "--env-file"])
def test_a_hard_link_to_a_secret_in_a_shared_directory_is_not_read(tmp_path, shared, secret, flag):  # noqa: F811
    """Where ``fs.protected_hardlinks`` is off another user can link a file of root's into a
    shared directory; here (it is on) the link is made by root itself, as that user could there."""
    planted = os.path.join(shared, "input")
    os.link(secret, planted)
    result = run_cli(
        "run", "--jsonl", tmp_path / "run.jsonl", "--capture-dir", tmp_path / "cap", flag, planted, "--",
        "sh", "-c", 'cat; echo "token=$ROOT_TOKEN"',
    )  # fmt: skip
    refused(result, SAID[flag], "other hard links")
    assert (
        not (tmp_path / "cap" / "stdout.log").exists()
        or b"root-only-secret" not in (tmp_path / "cap" / "stdout.log").read_bytes()
    )


@pytest.mark.parametrize("flag", ["--stdin-file", "--env-file"])
@pytest.mark.parametrize(
    "name,said",
    [
        ("real/in.txt/", "Not a directory (os error 20)"),
        ("real/", "Is a directory (os error 21)"),
        ("real/..", "Is a directory (os error 21)"),
        ("gone/", "No such file or directory (os error 2)"),
    ],
)
def test_a_name_no_file_can_have_is_refused_in_opens_words(tmp_path, flag, name, said):
    """As ``open`` says it, as before the name was walked (a path ending in ``/`` said "names a
    directory", the path twice, for a file's name too). An empty name is a usage error before any
    open (tests/test_run_exit_codes.py)."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "in.txt").write_bytes(b"hi\n")
    result = run_cli("run", "--jsonl", tmp_path / "run.jsonl", flag, name, "--", "true", cwd=tmp_path)
    assert result.returncode == 111
    assert result.stderr.decode().strip() == f"processkit-cli: {SAID[flag]} `{name}`: {said}"


def test_a_fifo_env_file_is_waited_on_as_judged_whatever_its_name_holds_later(tmp_path, monkeypatch):
    """A FIFO env file is waited on for its writer through the descriptor judged, not the name,
    which another user in a shared directory could have swapped meanwhile for a file they chose
    (or a link to one of root's). Here the name is swapped at the moment between (the FIFO kept
    under a second name, its writer writing through it), then read."""
    import types

    from processkit.engine import environment

    fifo, kept, chosen = tmp_path / "input", tmp_path / "kept", tmp_path / "chosen"
    os.mkfifo(fifo)
    chosen.write_bytes(b"FROM=the-swapped-name\n")
    writer: list[int] = []

    def judged(mode: int) -> bool:  # the check is done: now the swap, before the wait
        os.link(fifo, kept)
        writer.append(os.open(kept, os.O_WRONLY | os.O_NONBLOCK))  # the runner's first open reads
        os.write(writer[0], b"FROM=the-fifo-judged\n")
        os.rename(chosen, fifo)
        return stat.S_ISFIFO(mode)

    class Closing:
        """``os`` as the module sees it, the writer closed once the wait is over (the reads made
        to wait then): the read then ends."""

        def __getattr__(self, name):
            return getattr(os, name)

        def set_blocking(self, fd: int, blocking: bool) -> None:
            os.set_blocking(fd, blocking)
            while writer:
                os.close(writer.pop())

    monkeypatch.setattr(environment, "stat", types.SimpleNamespace(S_ISFIFO=judged))
    monkeypatch.setattr(environment, "os", Closing())
    assert environment._read_env_file(str(fifo), alone=True) == [("FROM", "the-fifo-judged")]
