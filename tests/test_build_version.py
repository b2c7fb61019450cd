"""Each build's version comes from git (setuptools-scm): a wheel built from a
later commit has a higher version, so ``pip install`` of it over an earlier
build's installs it (with one fixed version pip said "already installed"
and kept the old code). A build without git metadata takes the fallback
version (pyproject.toml), as the Docker build context does."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    not (ROOT / ".git").exists(), reason="the checkout has no git metadata to version from"
)


def run(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(
        list(args), cwd=cwd, check=True, capture_output=True, text=True, timeout=240
    )
    return done.stdout


def wheel_of(source: Path, out: Path) -> Path:
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(source))
    (wheel,) = out.glob("celery_dgs-*.whl")
    return wheel


def version_of(wheel: Path) -> Version:
    with zipfile.ZipFile(wheel) as whl:
        (name,) = [n for n in whl.namelist() if n.endswith(".dist-info/METADATA")]
        line = next(x for x in whl.read(name).decode().splitlines() if x.startswith("Version:"))
    return Version(line.split(":", 1)[1].strip())


def test_a_later_commits_build_installs_over_an_earlier_ones(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    run("git", "clone", "--quiet", str(ROOT), str(repo))
    run("git", "-c", "advice.detachedHead=false", "checkout", "--quiet", "HEAD~1", cwd=repo)
    older = wheel_of(repo, tmp_path / "older")
    run("git", "checkout", "--quiet", "-", cwd=repo)
    newer = wheel_of(repo, tmp_path / "newer")
    assert version_of(newer) > version_of(older), (older.name, newer.name)
    assert version_of(newer).is_devrelease

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", str(venv))
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    run(*pip, "install", "--quiet", "--no-deps", str(older))
    run(*pip, "install", "--quiet", "--no-deps", str(newer))  # as an operator upgrades
    shown = run(*pip, "show", "celery-dgs")
    assert f"Version: {version_of(newer)}" in shown.splitlines()


def test_a_build_without_git_metadata_takes_the_fallback_version(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    run("git", "clone", "--quiet", str(ROOT), str(repo))
    source = tmp_path / "source"
    run("git", "-C", str(repo), "archive", "--format=tar", "-o", str(tmp_path / "s.tar"), "HEAD")
    source.mkdir()
    run("tar", "-xf", str(tmp_path / "s.tar"), "-C", str(source))
    assert version_of(wheel_of(source, tmp_path / "out")) == Version("0.1.0.dev0")
