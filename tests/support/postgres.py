"""A throw-away PostgreSQL server for tests: initdb + pg_ctl on a temp dir and a free port.

PostgreSQL refuses to run as root; when the tests run as root the server
commands run as the ``postgres`` system user (or ``nobody``), which must own
the data directory.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from celery_dgs.embedded import free_port

PG_BINARIES = ("initdb", "pg_ctl", "postgres")


def postgres_available() -> bool:
    return all(shutil.which(b) for b in PG_BINARIES)


def _run_as() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError("running as root and no 'postgres' or 'nobody' user to run PostgreSQL as")


class PostgresServer:
    """``password``: the ``postgres`` role's, asked of every client (scram);
    ``None``: every client trusted."""

    def __init__(self, password: str | None = None) -> None:
        self.password = password
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="dgs-pg-"))
        self.data_dir = self.root / "data"
        self.log = self.root / "server.log"
        self.user = _run_as()

    def _run(self, *args: str) -> None:
        kwargs: dict[str, Any] = {}
        if self.user is not None:
            kwargs = {"user": self.user.pw_uid, "group": self.user.pw_gid, "cwd": str(self.root)}
        result = subprocess.run(
            args, capture_output=True, text=True, timeout=120, check=False, **kwargs
        )
        if result.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"{args[0]} failed: {result.stdout}{result.stderr}{log}")

    def start(self) -> PostgresServer:
        os.chmod(self.root, 0o755)
        if self.user is not None:
            os.chown(self.root, self.user.pw_uid, self.user.pw_gid)
        auth = ["--auth=trust"]
        if self.password is not None:
            pwfile = self.root / "pwfile"
            pwfile.write_text(self.password + "\n")
            if self.user is not None:
                os.chown(pwfile, self.user.pw_uid, self.user.pw_gid)
            auth = ["--auth=scram-sha-256", f"--pwfile={pwfile}"]
        self._run(
            "initdb",
            "-D",
            str(self.data_dir),
            "-U",
            "postgres",
            *auth,
            "-E",
            "UTF8",
            "--no-sync",
        )
        opts = f"-p {self.port} -k {self.root} -h 127.0.0.1 -c fsync=off -c max_connections=200"
        self._run(
            "pg_ctl",
            "-D",
            str(self.data_dir),
            "-o",
            opts,
            "-l",
            str(self.log),
            "-w",
            "-t",
            "60",
            "start",
        )
        return self

    def pause(self) -> None:
        """Stop the server (fast shutdown), keeping its data for :meth:`resume`."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        """Start the server :meth:`pause` stopped, on the same port."""
        opts = f"-p {self.port} -k {self.root} -h 127.0.0.1 -c fsync=off -c max_connections=200"
        self._run(
            "pg_ctl", "-D", str(self.data_dir), "-o", opts, "-l", str(self.log), "-w", "start"
        )

    def url(self, database: str = "postgres", password: str | None = None) -> str:
        """The URL of ``database`` as ``postgres``, with ``password`` (default:
        the server's own, if it has one)."""
        secret = self.password if password is None else password
        user = "postgres" if secret is None else f"postgres:{secret}"
        return f"postgresql+psycopg://{user}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import sqlalchemy as sa

        engine = sa.create_engine(self.url(), isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        engine.dispose()
        return self.url(name)

    def stop(self) -> None:
        """Stop the server at once; its directory is deleted by a process of
        its own, which the caller does not wait for: after a test session
        it holds a few GB, whose unlinking took 40-80 s."""
        if self.data_dir.exists():
            with contextlib.suppress(RuntimeError):
                self._run("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop")
        remove = 'rm -rf -- "$1" </dev/null >/dev/null 2>&1 &'
        subprocess.run(
            ["sh", "-c", remove, "sh", str(self.root)], check=False, start_new_session=True
        )
