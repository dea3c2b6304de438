"""``inputs`` and ``--resume`` (Bazel's habit): a job runs again when the content of a file it
names changed, not when only its time did, through the real CLI. Each job appends its id to a
log as it runs, so what ran is what the children did."""

from __future__ import annotations

import hashlib
import json
import os

from conftest import run_cli

LOG_ID = "import os,sys; os.write(os.open(sys.argv[1], os.O_WRONLY|os.O_APPEND), (sys.argv[2]+'\\n').encode())"


def run(tmp_path, *flags):
    import sys

    jobs = [
        {
            "id": "compile",
            "args": [sys.executable, "-c", LOG_ID, str(tmp_path / "log"), "compile"],
            "cwd": str(tmp_path),
            "inputs": ["src/*.c", "conf.txt"],
        },
        {"id": "link", "args": [sys.executable, "-c", LOG_ID, str(tmp_path / "log"), "link"], "needs": ["compile"]},
        {"id": "other", "args": [sys.executable, "-c", LOG_ID, str(tmp_path / "log"), "other"]},
    ]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    (tmp_path / "log").write_text("")
    result = run_cli("batch", manifest, "--out", tmp_path / "out", *flags)
    assert result.returncode == 0, result.stderr
    return (tmp_path / "log").read_text().split(), result.stderr.decode()


def test_resume_runs_a_job_again_only_when_an_inputs_content_changed(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.c").write_text("int a;\n")
    (tmp_path / "conf.txt").write_text("O2\n")
    ran, _ = run(tmp_path)
    assert sorted(ran) == ["compile", "link", "other"]
    lines = [json.loads(line) for line in (tmp_path / "out" / "summary.jsonl").read_text().splitlines()]
    compile_line = next(line for line in lines if line["id"] == "compile")
    assert compile_line["inputs_sha256"] == {
        "src/a.c": hashlib.sha256(b"int a;\n").hexdigest(),
        "conf.txt": hashlib.sha256(b"O2\n").hexdigest(),
    }
    assert all("inputs_sha256" not in line for line in lines if line["id"] != "compile")

    assert run(tmp_path, "--resume")[0] == [], "nothing changed"
    os.utime(src / "a.c", (1, 1))  # only its time
    (tmp_path / "conf.txt").write_text("O2\n")  # written again, the same bytes
    assert run(tmp_path, "--resume")[0] == [], "a file's time is not its content"

    (src / "a.c").write_text("int a = 1;\n")
    ran, stderr = run(tmp_path, "--resume")
    assert ran == ["compile", "link"], "the job whose input changed, and what needs it"
    assert "compile: its input src/a.c changed since it exited 0: run again" in stderr

    (src / "b.c").write_text("int b;\n")
    ran, stderr = run(tmp_path, "--resume")
    assert ran == ["compile", "link"] and "its input src/b.c is new" in stderr
    assert run(tmp_path, "--resume")[0] == []
