"""The built wheel carries the metadata, license and data files an install
needs; the example project imports and declares valid schedules."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "celery_dgs"
# Left out of the copy the wheel is built from: VCS data, environments, caches
# and earlier build output (a stale build/ directory could leak into a wheel).
_NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "*.pyc",
    ".*_cache", ".hypothesis", ".demo", "*.sqlite3",
)  # fmt: skip
_BUILT: dict[Path, Path] = {}


def build_wheel(base: Path) -> Path:
    """Build the project's wheel (once per ``base`` directory) from a copy of the
    checkout, so the build writes nothing into it; returns the ``.whl`` path."""
    if base not in _BUILT:
        src, out = base / "src", base / "dist"
        shutil.copytree(ROOT, src, ignore=_NOT_SOURCE, dirs_exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
             "--disable-pip-version-check", "--wheel-dir", str(out), str(src)],
            check=True, timeout=240,
        )  # fmt: skip
        (wheel,) = out.glob("celery_dgs-*.whl")
        _BUILT[base] = wheel
    return _BUILT[base]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.getbasetemp() / "wheel")


def _metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as whl:
        (name,) = [n for n in whl.namelist() if n.endswith(".dist-info/METADATA")]
        return HeaderParser().parsestr(whl.read(name).decode())


def test_wheel_metadata_has_license_author_classifiers_and_redis_extra(wheel: Path) -> None:
    meta = _metadata(wheel)
    assert meta["License-Expression"] == "MIT"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert meta["Author"] == "celery-dgs maintainers"
    classifiers = set(meta.get_all("Classifier") or [])
    assert {
        "Framework :: Celery",
        "Operating System :: OS Independent",
        "Topic :: System :: Distributed Computing",
        "Typing :: Typed",
        *(f"Programming Language :: Python :: 3.{minor}" for minor in (10, 11, 12, 13)),
    } <= classifiers
    assert any(c.startswith("Development Status :: ") for c in classifiers)
    requires = {r.name.lower(): r for r in map(Requirement, meta.get_all("Requires-Dist") or [])}
    # kombu's Redis transport imports `packaging`, declared only by the redis extras.
    assert "redis" in requires["celery"].extras
    assert requires["celery"].marker is None
    assert "redis" in requires["kombu"].extras


def test_wheel_contains_license_typing_marker_lua_scripts_and_migrations(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "celery_dgs/py.typed" in names
    data = [p for p in PACKAGE.rglob("*")
            if p.is_file() and (p.suffix == ".lua" or "migrations" in p.parts)
            and "__pycache__" not in p.parts]  # fmt: skip
    assert any(p.suffix == ".lua" for p in data)
    assert any(p.name == "env.py" for p in data)
    missing = {p.relative_to(ROOT).as_posix() for p in data} - names
    assert not missing, f"not in the wheel: {sorted(missing)}"


def test_example_project_declares_valid_schedules() -> None:
    from example_project.proj import app, dgs

    decl = dgs.all_declarations()
    assert not decl.errors
    assert set(decl.specs) == {
        "example.scrape_bills", "example.scrape_votes", "example.flaky_committee_pages",
        "example.heavy_archive_sync", "example.nightly_report",
    }  # fmt: skip
    assert app.conf.worker_direct is True


def test_docker_compose_runs_the_example_project() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"redis", "postgres", "worker1", "worker2", "beat"} <= set(services)
    assert "-S celery_dgs:DeadlineScheduler" in services["beat"]["command"]
    for name in ("worker1", "worker2", "beat"):
        assert "example_project.proj" in services[name]["command"]
        env = services[name]["environment"]
        assert env["DGS_EXAMPLE_DATABASE_URL"].startswith("postgresql+psycopg://")
    nodes = {services[n]["command"].split(" -n ")[1].split()[0] for n in ("worker1", "worker2")}
    assert nodes == {"w1@node1", "w2@node2"}


def test_unknown_dgs_setting_is_rejected_with_the_valid_list() -> None:
    import pytest

    from celery_dgs.errors import SettingsError
    from celery_dgs.settings import DgsSettings

    with pytest.raises(SettingsError, match=r"dgs_ping_timout.*dgs_ping_timeout"):
        DgsSettings.from_conf({"dgs_ping_timout": 5})


def test_decorators_pass_every_field_to_the_spec() -> None:
    from datetime import timedelta

    from celery import Celery

    from celery_dgs.core.spec import CronSpec, PeriodicSpec
    from celery_dgs.dgs import DGS

    app = Celery("decl-test")
    dgs = DGS(app, install_worker_hooks=False)

    @dgs.periodic(period=60, cooldown=10, configuration="fast", blackouts=[("01:00", "02:00")],
                  dont_run_on_nodes=["n1"], pool="chrome", args=[1], kwargs={"k": "v"})
    @dgs.cron("0 0 * * *", within=timedelta(hours=6), tz="America/New_York")
    @app.task(name="t.job")
    def job(*args: object, **kwargs: object) -> None: ...

    periodic, cron = dgs.declarations.specs["t.job@fast"], dgs.declarations.specs["t.job"]
    assert isinstance(periodic, PeriodicSpec)
    assert periodic.scheduling_period == timedelta(seconds=60)
    assert periodic.cooldown_duration == timedelta(seconds=10)
    assert [str(b) for b in periodic.blackout_periods] == ["01:00:00-02:00:00"]
    assert periodic.dont_run_on_nodes == frozenset({"n1"})
    assert (periodic.pool, periodic.args, dict(periodic.kwargs)) == ("chrome", (1,), {"k": "v"})
    assert isinstance(cron, CronSpec)
    assert cron.cron_max_schedule_duration == timedelta(hours=6)
    assert cron.tz == "America/New_York"
    assert not dgs.declarations.errors
