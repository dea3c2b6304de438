"""A capture's floor: a bare C reader doing only a pump's kernel work and digest, to run beside the pumps.

Why: issue 49 asks the native pump's runner CPU at 4 KiB writes into a capture to be ≤ 0.8× the
Python pump's. Both pumps pay the same kernel copies (the pipe's pages out, the capture file's
fresh pages in) and the same SHA-256, so the question is how far above those either pump is. The
reader built here (``floor``) has no event loop, no interpreter, no thread and no start-up: it
makes the pipe as the runner does (1 MiB), runs the writer on it and reads 256 KiB chunks until
EOF, per MODE:

- ``hash``: read, write into FILE, the project's own SHA-256 (csrc/sha256.c) inline: a pump's
  whole per-byte work, nothing else;
- ``copy``: read and write only (the kernel's part);
- ``splice``: splice(2) from the pipe into FILE, no digest (the one copy a kernel path can skip);
- ``splice-map``: splice into FILE, then the digest read through a mapping of the file's pages.

It prints its own CPU and the writer's. Built once into DIR with the writer, then run through
``writer_share.py`` beside the pumps (its tree less its writer is the reader's CPU):

    python3 bench/pump_floor.py DIR          # DIR/floor and DIR/W (throughput.WRITER_C)
    python3 bench/writer_share.py -n 7 --touch 2g \\
      "env PROCESSKIT_PUMP=native processkit-cli run --jsonl /dev/shm/a.jsonl --capture-dir /dev/shm/ca --capture-max-bytes 2g -- DIR/W 4096 1073741824 {cpu}" \\
      "env PROCESSKIT_PUMP=python processkit-cli run --jsonl /dev/shm/b.jsonl --capture-dir /dev/shm/cb --capture-max-bytes 2g -- DIR/W 4096 1073741824 {cpu}" \\
      "DIR/floor hash /dev/shm/f DIR/W 4096 1073741824 {cpu}"
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import WRITER_C  # noqa: E402

CSRC = Path(__file__).resolve().parent.parent / "csrc"

FLOOR_C = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sha256.h"

#define CHUNK (256 * 1024)

static double cpu(int who)
{
    struct rusage u;
    getrusage(who, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 3 ? argv[1] : "";
    int hash = !strcmp(mode, "hash"), copy = !strcmp(mode, "copy"), map = !strcmp(mode, "splice-map");
    int pipes[2], fd, status;
    unsigned long long done = 0, hashed = 0;
    unsigned char *buf, digest[32];
    pk_sha256 sha;
    pid_t pid;
    if (!hash && !copy && !map && strcmp(mode, "splice"))
        return 2;
    if (pipe(pipes) || (fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0600)) < 0)
        return 1;
    fcntl(pipes[0], F_SETPIPE_SZ, 1 << 20);
    if (!(pid = fork())) {
        dup2(pipes[1], 1);
        execv(argv[3], argv + 3);
        _exit(127);
    }
    close(pipes[1]);
    buf = aligned_alloc(4096, CHUNK);
    pk_sha256_init(&sha);
    for (;;) {
        ssize_t count = hash || copy ? read(pipes[0], buf, CHUNK) : splice(pipes[0], NULL, fd, NULL, CHUNK, 0);
        if (count <= 0)
            break;
        if ((hash || copy) && write(fd, buf, (size_t)count) != count)
            return 1;
        if (hash)
            pk_sha256_update(&sha, buf, (size_t)count);
        done += (unsigned long long)count;
        if (map) {
            unsigned long long from = hashed & ~4095ULL;
            unsigned char *pages = mmap(NULL, done - from, PROT_READ, MAP_SHARED, fd, (off_t)from);
            if (pages == MAP_FAILED)
                return 1;
            pk_sha256_update(&sha, pages + (hashed - from), done - hashed);
            munmap(pages, done - from);
            hashed = done;
        }
    }
    pk_sha256_final(&sha, digest);
    waitpid(pid, &status, 0);
    fprintf(stderr, "floor: %s %llu bytes, reader %.3f s, writer %.3f s, digest %02x%02x...\n", mode, done,
                cpu(RUSAGE_SELF), cpu(RUSAGE_CHILDREN), digest[0], digest[1]);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
"""


def build(work: Path) -> tuple[Path, Path]:
    """``work``/floor (with csrc/sha256.c, the native module's flags) and ``work``/W, the writer."""
    cc = shutil.which("cc")
    if not cc:
        raise SystemExit("needs cc")
    (work / "floor.c").write_text(FLOOR_C)
    (work / "W.c").write_text(WRITER_C)
    floor, writer = work / "floor", work / "W"
    subprocess.run(
        [cc, "-O3", "-std=gnu11", "-I", str(CSRC), "-o", str(floor), str(work / "floor.c"), str(CSRC / "sha256.c")],
        check=True,
    )
    subprocess.run([cc, "-O2", "-o", str(writer), str(work / "W.c")], check=True)
    return floor, writer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path, help="where floor and W are built")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    for path in build(args.dir):
        print(path)


if __name__ == "__main__":
    main()
