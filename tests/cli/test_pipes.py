"""``celery dgs export | head``: the reader leaving early ends the command
quietly, in a real process with a real pipe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from tests.cli.test_declaration_invalid import ROOT, run_dgs


def test_export_into_a_pipe_closed_early_stops_quietly(
    sqlite_url: str, redis_url: str, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DECL_REDIS_URL": redis_url,
        "DECL_DATABASE_URL": sqlite_url,
        "DECL_PREFIX": f"pipe{uuid.uuid4().hex[:6]}",
        "DECL_PERIOD": "3600",
    }
    rows = tmp_path / "many.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"name": f"decl.a@site-{i}", "period": "1h", "args": []}) + "\n"
            for i in range(3000)
        )
    )
    imported = run_dgs(env, "import", str(rows))
    assert imported.returncode == 0, imported.stderr
    script = Path(sys.executable).with_name("celery")
    celery = [str(script)] if script.exists() else [sys.executable, "-m", "celery"]
    proc = subprocess.Popen(
        [*celery, "-A", "tests.cli.decl_proj", "dgs", "export"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    first = proc.stdout.read(200)  # a reader like `head -c 200`, then gone
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    proc.wait(timeout=60)
    assert first.startswith(b'{"name": "decl.a@site-')
    assert stderr == "", stderr
    assert proc.returncode == 141  # as a process SIGPIPE ended: not 1 (a schedule in ERROR)
