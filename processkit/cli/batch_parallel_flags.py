"""GNU parallel's flags beyond those ``batch_peers.PEERS_FLAGS`` names one by one: each of the
rest told in one line (whose flag it is, and what stands for it here or why nothing does) instead
of argparse's usage (another name of a flag there is ``batch_peers.ALIASES``'). Grouped by the reason, each said
once; the phrases several tables share are here too. Read against parallel's man page: a flag
whose meaning differs from ours is never taken as ours.
"""

from __future__ import annotations

ONE_ARGUMENT = (
    "none here: a job takes one argument of each source ({1} {2} ..., :::+ links two sources pairwise), "
    "never several (a manifest line's args may hold any number)"
)
WHOLE_STDIN = (
    "none here: no job reads a block of the batch's stdin (a job's stdin is /dev/null or a file: --stdin-file F, a "
    "manifest line's stdin_file), so split the input first (split -l N) and give each piece as a job's stdin_file"
)
ONE_STRING = "here it is {} (and {1}, {.}, {/}, ...), which cannot be renamed: write {} where you wrote yours"
ELSEWHERE = "here --dask-scheduler ADDRESS runs the jobs on a Dask cluster's workers (docs/fleet.md), not over ssh"
LINES = (
    "here an argument is a line (of a :::: file, of stdin), and no other delimiter is read: make the input lines first"
)
IN_FILES = (
    "here each job's output is kept in files, OUT/ID/capture/stdout.log and stderr.log (--out DIR; under --keep "
    "failed, a failed job's alone), and the closing line names where"
)
NO_TEMP = (
    "none here: no output is held in temporary files; each job's is written to OUT/ID/capture/ as it comes "
    "(--out DIR says where, --capture-max-bytes bounds it)"
)
NO_SEMAPHORE = (
    "none here: a batch runs a whole list of jobs and waits for them, and is no semaphore for commands "
    "started one at a time: give them as a manifest (one JSON line each) with -j N"
)
NO_TERMINAL = "none here: a job never has the terminal (its stdin is /dev/null or --stdin-file's, its output captured)"
CPUS = (
    "none here: -j N%, +N and -N count the CPUs this process may use (its affinity and CPU quota), "
    "whatever their sockets, cores or threads"
)
NO_SCRIPT = (
    "none here: a batch reads no script of its own; write the jobs as a manifest (one JSON line each) "
    "and run processkit-cli batch FILE"
)
NO_CODE = "none here: a template runs no code; compute the value in the command (sh -c '...' sh {}) or in its input"
NOTHING_TO_DO = "nothing here acts on it: drop it"
VERSION = "here it is processkit-cli --version"
NO_FIRST_LINE = (
    "none here: every line is an argument, the first too, and no column has a name ({1} {2} name the sources): "
    "leave the header out first (tail -n +2 list.txt)"
)
JOBLOG = (
    "here every job's line is in OUT/summary.jsonl (--out), which --resume reads: a job that did not exit 0 "
    "runs again, the others are skipped (parallel's --resume-failed)"
)
COLUMNS = "here a line is one argument: give each column as a file, linked with ::::+"
NO_QUOTING = "here no shell runs a job, so an argument is never split: nothing to quote"

_GROUPS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("--files", "--output-as-files", "--outputasfiles", "--files0"), f"GNU parallel's; {IN_FILES}"),
    (("--tmpdir", "--compress", "--compress-program", "--decompress-program"), f"GNU parallel's; {NO_TEMP}"),
    (("--header",), f"GNU parallel's; {NO_FIRST_LINE}"),
    (("--skip-first-line",), f"GNU parallel's; {NO_FIRST_LINE}"),
    (("--csv",), f"GNU parallel's (columns as CSV reads them); {COLUMNS}"),
    (
        ("--sem", "--semaphore", "--semaphore-name", "--semaphore-timeout", "--st", "--bg", "--fg", "--wait"),
        f"GNU parallel's; {NO_SEMAPHORE}",
    ),
    (
        (
            "--basefile",
            "--bf",
            "--cleanup",
            "--controlmaster",
            "-M",
            "--filter-hosts",
            "--hostgroups",
            "--hgrp",
            "--nonall",
            "--onall",
            "--return",
            "--rsync-opts",
            "--ssh",
            "--ssh-delay",
            "--sshdelay",
            "--transfer",
            "--transferfile",
            "--tf",
            "--trc",
        ),
        f"GNU parallel's (for remote hosts); {ELSEWHERE}",
    ),
    (
        (
            "--pipe-part",
            "--spreadstdin",
            "--block-size",
            "--block-timeout",
            "--bt",
            "--cat",
            "--fifo",
            "--recstart",
            "--recend",
            "--regexp",
            "--remove-rec-sep",
            "--removerecsep",
            "--rrs",
            "--round-robin",
            "--round",
            "--group-by",
            "--bin",
            "--shard",
            "--tee",
        ),
        f"GNU parallel's (for --pipe); {WHOLE_STDIN}",
    ),
    (
        (
            "--basenamereplace",
            "--bnr",
            "--basenameextensionreplace",
            "--bner",
            "--dirnamereplace",
            "--dnr",
            "--extensionreplace",
            "--er",
            "--seqreplace",
            "--slotreplace",
            "--parens",
        ),
        f"GNU parallel's; {ONE_STRING}",
    ),
    (
        ("--arg-sep", "--arg-file-sep"),
        "GNU parallel's; here the sources are ::: and :::: (and :::+, ::::+), "
        "which cannot be renamed: an argument that is one of them goes in a :::: file",
    ),
    (("--rpl",), f"GNU parallel's (a replacement string as Perl); {NO_CODE}"),
    (
        ("--plus",),
        "GNU parallel's; none here: the replacement strings are {} {.} {/} {//} {/.} {#} {%}, {N} and {-N}, "
        "not --plus's further ones",
    ),
    (("-s", "--max-chars"), f"GNU parallel's and xargs'; {ONE_ARGUMENT}"),
    (
        ("-x", "--exit"),
        "GNU parallel's and xargs' (stop when a command line passes -s's size); here a job whose command passes "
        "1 MiB is always refused (100, naming the job)",
    ),
    (("--link", "--xapply"), "GNU parallel's; here :::+ (::::+) links a source to the one before it, pairwise"),
    (
        ("-E", "-e", "--eof"),
        "GNU parallel's and xargs' end-of-input string; none here: every line is an argument, the last too: "
        "cut the input first (sed '/^EOF$/q')",
    ),
    (("--trim",), "GNU parallel's; none here: a line is one argument as it is, its spaces kept: trim it first"),
    (("--shebang", "--hashbang", "--shebang-wrap"), f"GNU parallel's; {NO_SCRIPT}"),
    (("--shell-quote", "--shellquote"), f"GNU parallel's; {NO_QUOTING}"),
    (("--profile", "-J"), "GNU parallel's; none here: no profile is read, so give the flags on the line"),
    (
        ("--record-env", "--session", "--embed", "--plain", "--gnu", "--citation", "--no-notice"),
        f"GNU parallel's; {NOTHING_TO_DO}",
    ),
    (("--shell-completion",), "GNU parallel's; here it is processkit-cli completion SHELL"),
    (("--version", "-V", "--minversion"), f"GNU parallel's; {VERSION}"),
    (
        (
            "--number-of-cpus",
            "--number-of-cores",
            "--number-of-sockets",
            "--number-of-threads",
            "--use-cores-instead-of-threads",
            "--use-sockets-instead-of-threads",
            "--use-cpus-instead-of-cores",
        ),
        f"GNU parallel's; {CPUS}",
    ),
    (("--tmux", "--tmuxpane", "--tty"), f"GNU parallel's; {NO_TERMINAL}"),
    (("--open-tty", "-o"), f"GNU parallel's and xargs'; {NO_TERMINAL}"),
    (
        ("--interactive", "-p"),
        "GNU parallel's and xargs'; none here: no job asks before it runs (--dry-run prints them first)",
    ),
    (
        ("--latest-line", "--ll"),
        "GNU parallel's; here the progress bar is drawn whenever stderr is a terminal (not under TERM=dumb), "
        "and each job's output is in OUT/ID/capture/",
    ),
    (
        ("--color", "--color-failed", "--cf", "--ctag", "--ctagstring"),
        "GNU parallel's; none here: no job's output "
        "is tagged or coloured (--show-output prints each job's output whole under a '==> ID (exit N) <==' header)",
    ),
    (
        ("--no-keep-order",),
        "GNU parallel's; here it is the default: --show-output prints each job's output in finishing order",
    ),
    (("--silent",), "GNU parallel's; here it is the default: no job's command is printed"),
    (
        ("--memsuspend", "--noswap"),
        "GNU parallel's; none here: no job is suspended or held for the machine's "
        "memory (--memory-budget SIZE starts a job only while the running jobs' expected peak fits)",
    ),
    (
        ("--limit",),
        "GNU parallel's; none here: no command decides whether a job starts (-j/--jobs, "
        "--memory-budget and --group-limit do)",
    ),
    (
        ("--term-seq",),
        "GNU parallel's; none here: a job ended by --timeout or a stop gets SIGTERM, then SIGKILL after --grace DUR",
    ),
    (
        ("--total-jobs", "--total"),
        "GNU parallel's; none here: the progress bar counts the jobs from the sources, "
        "or once a piped source has ended",
    ),
    (
        ("--process-slot-var",),
        "GNU parallel's and xargs'; here {%} puts the job's slot in its arguments, and no variable names it",
    ),
    (("--filter",), "GNU parallel's; none here: every job made runs, so choose the inputs first (grep)"),
    (("--template", "--tmpl"), "GNU parallel's; none here: no file is filled in per job: give the values as arguments"),
    (
        ("--sql", "--sql-master", "--sql-and-worker", "--sql-worker", "--sqlmaster", "--sqlworker", "--sqlandworker"),
        "GNU parallel's; none here: the jobs come from a manifest or a template, not a database",
    ),
    (
        ("--show-limits", "--max-line-length-allowed"),
        "GNU parallel's and xargs'; none here: a job takes one argument of each source, and its command may hold up to 1 MiB",
    ),
    (("--_parset",), f"GNU parallel's (parset's); {NOTHING_TO_DO}"),
)

PARALLELS_OTHERS = {flag: words for flags, words in _GROUPS for flag in flags}

# The other spellings parallel itself takes for a flag above (its option table; an older man page
# shows some, ``--termseq``, ``--semaphoretimeout``, where a newer one hyphenates): each names the
# flag its man page spells now, as ``batch_peers.ALIASES`` does.
PARALLELS_SPELLINGS = {
    "--semaphorename": "--semaphore-name",
    "--semaphoretimeout": "--semaphore-timeout",
    "--termseq": "--term-seq",
    "--bibtex": "--citation",
    "--linebuffer": "--line-buffer",
    "--linebuffered": "--line-buffer",
    "--line-buffered": "--line-buffer",
    "--keeporder": "--keep-order",
    "--nokeeporder": "--no-keep-order",
    "--roundrobin": "--round-robin",
    "--argsep": "--arg-sep",
    "--argfilesep": "--arg-file-sep",
    "--tempdir": "--tmpdir",
    "--hostgroup": "--hostgroups",
    "--hostgrp": "--hostgroups",
    "--work-dir": "--workdir",
    "--col-sep": "--colsep",
    "--blocksize": "--block-size",
    "--tag-string": "--tagstring",
    "--resumefailed": "--resume-failed",
    "--retryfailed": "--retry-failed",
    "--result": "--results",
    "--showlimits": "--show-limits",
    "--min-version": "--minversion",
    "--regex": "--regexp",
    "--transfer-files": "--transferfile",
    "--transferfiles": "--transferfile",
    "--filterhosts": "--filter-hosts",
    "--recordenv": "--record-env",
    "--willcite": "--will-cite",
    "--nonotice": "--no-notice",
}
