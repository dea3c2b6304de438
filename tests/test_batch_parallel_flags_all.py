"""Every flag of GNU parallel's (its man page's OPTIONS, 20221122) given to ``batch``: one line
that names it as parallel's and what stands for it here, or why nothing does (exit 100, nothing
run), never argparse's "unrecognized arguments" and the usage. Those that are ours too (``-j``,
``--timeout``, ``--dry-run``, ...) mean here what they mean there, or say the difference in
``--help``; they are not in the list."""

from __future__ import annotations

import pytest

from conftest import run_cli

from processkit.cli import batch_peers
from processkit.cli.batch import build_parser
from processkit.errors import Failure

USAGE = 100
PARALLELS = """
--_parset --arg-file --arg-file-sep --arg-sep --bar --basefile --basenameextensionreplace --basenamereplace
--bf --bg --bin --block --block-size --block-timeout --bner --bnr --bt --cat --cf --cleanup --color
--color-failed --colsep --compress --compress-program --controlmaster --csv --ctag --ctagstring
--decompress-program --delay --delimiter --dirnamereplace --dnr --embed --eof --er --eta --exit
--extensionreplace --fg --fifo --files --filter --filter-hosts --gnu --group --group-by --halt --halt-on-error
--hashbang --header --hgrp --hostgroups --interactive --jl --joblog --keep-order --latest-line --lb --limit
--line-buffer --link --ll --load --max-args --max-chars --max-line-length-allowed --max-lines --max-procs
--max-replace-args --memfree --memsuspend --minversion --nice --no-keep-order --no-run-if-empty --nonall
--noswap --null --number-of-cores --number-of-cpus --number-of-sockets --number-of-threads --onall --open-tty
--output-as-files --outputasfiles --parens --pipe --pipe-part --plain --plus --process-slot-var --profile
--progress --quote --recend --record-env --recstart --regexp --remove-rec-sep --removerecsep --replace --res
--results --resume-failed --retry-failed --return --round --round-robin --rpl --rrs --rsync-opts --semaphore
--semaphore-name --semaphore-timeout --seqreplace --session --shard --shebang --shebang-wrap --shell-completion
--shell-quote --show-limits --shuf --silent --skip-first-line --slf --slotreplace --spreadstdin --sql
--sql-and-worker --sql-master --sql-worker --ssh --ssh-delay --sshlogin --sshloginfile --st --tag --tagstring
--tee --template --term-seq --tf --tmpdir --tmpl --tmux --tmuxpane --total --total-jobs --transfer
--transferfile --trc --trim --tty --ungroup --use-cores-instead-of-threads --use-cpus-instead-of-cores
--use-sockets-instead-of-threads --verbose --version --wait --wd --workdir --xapply --xargs
--sem --will-cite
-0 -C -E -I -J -L -M -N -P -S -V -X -a -d -e -i -k -l -m -n -o -p -q -r -s -t -u -v -x
""".split()


def test_every_flag_of_gnu_parallels_is_told_in_one_line():
    """Read as the command reads its line (``batch_peers.parse``), alone and with a value after it."""
    for flag in PARALLELS:
        for given in ([flag], [flag, "x"]):
            with pytest.raises(Failure) as told:
                batch_peers.parse(build_parser(), [*given, "--", "true", ":::", "a"])
            assert told.value.message.startswith(f"{flag} is GNU parallel's"), (given, told.value.message)
            assert "\n" not in told.value.message


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (["-u"], b"-u is GNU parallel's --ungroup; here --show-output prints each job's output whole as it ends"),
        (["-uj2"], b"-u is GNU parallel's --ungroup; here --show-output"),
        (["--header", ":"], b"--header is GNU parallel's; none here: every line is an argument, the first too"),
        (["--sem"], b"--sem is GNU parallel's; none here: a batch runs a whole list of jobs and waits for them"),
        (["--files"], b"--files is GNU parallel's; here each job's output is kept in files, "),
        (
            ["--res", "r"],
            b"--res is GNU parallel's --results; here each job's output is kept in OUT/ID/capture/ (--out)\n",
        ),
        (
            ["--halt-on-error", "1"],
            b"--halt-on-error is GNU parallel's --halt; here its soon,fail=1 is --halt-on-failure",
        ),
        (
            ["--plus"],
            b"--plus is GNU parallel's; none here: the replacement strings are {} {.} {/} {//} {/.} {#} {%}, "
            b"{N} and {-N}",
        ),
        (
            ["--ctag"],
            b"--ctag is GNU parallel's; none here: no job's output is tagged or coloured (--show-output "
            b"prints each job's output whole under",
        ),
        (["--tmpdir", "t"], b"--tmpdir is GNU parallel's; none here: no output is held in temporary files"),
        (["--jl", "log"], b"--jl is GNU parallel's --joblog; here every job's line is in OUT/summary.jsonl"),
    ],
    ids=lambda value: "".join(value) if isinstance(value, list) else "",
)
def test_parallels_flags_argparse_refused_bare_point_the_way(tmp_path, given, said):
    """These got argparse's "unrecognized arguments" and the whole usage: now one line, 100,
    nothing run and no --out made."""
    result = run_cli("batch", "--out", tmp_path / "out", *given, "--", "touch", tmp_path / "ran", ":::", "a")
    assert result.returncode == USAGE, result.stderr
    assert result.stderr.startswith(b"processkit-cli: " + said), result.stderr
    assert result.stderr.count(b"\n") == 1, "one line: no usage, no traceback"
    assert not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()


def test_parallels_env_name_is_told_as_the_flag_not_as_job_1s_key(tmp_path):
    """``--env PATH`` as parallel writes it (a variable copied to remote hosts) was refused as
    ``job 1: invalid value for 'env'``, naming a manifest key the user never wrote."""
    result = run_cli("batch", "--out", tmp_path / "out", "--env", "PATH", "--", "touch", tmp_path / "ran", ":::", "a")
    assert result.returncode == USAGE, result.stderr
    assert result.stderr == (
        b"processkit-cli: invalid value 'PATH' for '--env <K=V>': expected KEY=VALUE (GNU parallel's --env NAME "
        b"copies a variable to remote hosts; here every job inherits the batch's environment)\n"
    )
    assert not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()


def test_parallels_other_spellings_name_the_flag_as_its_man_page_spells_it(tmp_path):
    """``--termseq``, ``--semaphoretimeout`` (an older man page's spellings, still parallel's),
    ``--linebuffer``, ``--bibtex``: parallel takes them, and they got argparse's "unrecognized
    arguments" and the whole usage. Each names the flag its man page spells now."""
    for given, said in (
        (["--termseq", "INT,200"], b"--termseq is GNU parallel's --term-seq; none here: a job ended by --timeout"),
        (["--semaphoretimeout", "5"], b"--semaphoretimeout is GNU parallel's --semaphore-timeout; none here:"),
        (["--linebuffer"], b"--linebuffer is GNU parallel's --line-buffer; here --show-output prints"),
    ):
        result = run_cli("batch", "--out", tmp_path / "out", *given, "--", "touch", tmp_path / "ran", ":::", "a")
        assert result.returncode == USAGE, result.stderr
        assert result.stderr.startswith(b"processkit-cli: " + said), result.stderr
        assert result.stderr.count(b"\n") == 1, "one line: no usage, no traceback"
    assert not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()
    for spelling, flag in batch_peers.PARALLELS_SPELLINGS.items():
        with pytest.raises(Failure) as told:
            batch_peers.parse(build_parser(), [spelling, "--", "true", ":::", "a"])
        assert told.value.message.startswith(f"{spelling} is GNU parallel's {flag}; "), told.value.message
