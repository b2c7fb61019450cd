"""The built wheel carries the metadata, license and data files an install
needs; docker-compose.yml runs the example project from the image the
Dockerfile builds; the example project imports and declares valid schedules."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from tests.support.compose_file import compose_problems, load_compose

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "celery_dgs"
# Left out of the copy the wheel is built from: VCS data, environments, caches
# and earlier build output (a stale build/ directory could leak into a wheel).
_NOT_SOURCE = shutil.ignore_patterns(
    ".git",
    ".venv",
    ".venv-py3*",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    "*.pyc",
    ".*_cache",
    ".hypothesis",
    ".demo",
    "*.sqlite3",
)
_BUILT: dict[Path, Path] = {}


def build_wheel(base: Path) -> Path:
    """Build the project's wheel (once per ``base`` directory) from a copy of the
    checkout, so the build writes nothing into it; returns the ``.whl`` path."""
    if base not in _BUILT:
        src, out = base / "src", base / "dist"
        shutil.copytree(ROOT, src, ignore=_NOT_SOURCE, dirs_exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "--quiet",
                "--disable-pip-version-check",
                "--wheel-dir",
                str(out),
                str(src),
            ],
            check=True,
            timeout=240,
        )
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
    data = [
        p
        for p in PACKAGE.rglob("*")
        if p.is_file()
        and (p.suffix == ".lua" or "migrations" in p.parts)
        and "__pycache__" not in p.parts
    ]
    assert any(p.suffix == ".lua" for p in data)
    assert any(p.name == "env.py" for p in data)
    missing = {p.relative_to(ROOT).as_posix() for p in data} - names
    assert not missing, f"not in the wheel: {sorted(missing)}"


def test_example_project_declares_valid_schedules() -> None:
    from example_project.proj import app, dgs

    decl = dgs.all_declarations()
    assert not decl.errors
    assert set(decl.specs) == {
        "example.scrape_bills",
        "example.scrape_votes",
        "example.flaky_committee_pages",
        "example.heavy_archive_sync",
        "example.nightly_report",
        "example.list_sources",
    }
    assert app.conf.worker_direct is True


# -- docker-compose.yml and the Dockerfile -----------------------------------------
# No Docker engine here (and `docker compose version` fails: the docker CLI has no
# compose plugin): the files are checked by reading them, and with `docker compose
# config` where the compose plugin is installed.
APP_SERVICES = ("worker1", "worker2", "beat")
THIRD_PARTY_IMAGES = {"redis": "redis:", "postgres": "postgres:"}


def _compose() -> dict[str, Any]:
    return load_compose(ROOT / "docker-compose.yml")


def _dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (KEYWORD, arguments), continuations joined."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip())
        for line in map(str.strip, text.splitlines())
        if line and not line.startswith("#")
    ]


def _celery_args(command: list[str]) -> tuple[dict[str, str], list[str]]:
    """A ``celery`` command's options that take a value (``{"-A": ...}``) and the
    NAME=VALUE settings after ``--``."""
    assert isinstance(command, list), "exec form: no shell between compose and celery"
    assert command[0] == "celery", command
    args, settings = command[1:], []
    if "--" in args:
        args, settings = args[: args.index("--")], args[args.index("--") + 1 :]
    options = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i].startswith("-")}
    return options, settings


def test_every_service_runs_an_image_restarts_and_installs_nothing_at_start() -> None:
    services = _compose()["services"]
    assert {"redis", "postgres", *APP_SERVICES} <= set(services)
    built = {services[name]["image"] for name in APP_SERVICES}
    assert len(built) == 1, "the app services share one image, built once"
    for name, service in services.items():
        assert service.get("restart") in {"always", "unless-stopped", "on-failure"}, name
        start = f"{service.get('entrypoint', '')} {service.get('command', '')}"
        assert not re.search(r"\bpip3?\b", start), f"{name} installs at start: {start}"
        assert "volumes" not in service or name in THIRD_PARTY_IMAGES, (
            f"{name} mounts files over the image"
        )
        if name in THIRD_PARTY_IMAGES:
            assert service["image"].startswith(THIRD_PARTY_IMAGES[name]), name
        else:
            assert service["build"] == {"context": ".", "dockerfile": "Dockerfile"}, name
            assert service["image"] in built, name


def _copies() -> list[tuple[list[str], str]]:
    """The Dockerfile's COPY instructions from the build context: (sources, destination)."""
    copies = []
    for kw, args in _dockerfile():
        words = [w for w in args.split() if not w.startswith("--")]
        if kw == "COPY" and "--from" not in args:
            copies.append((words[:-1], words[-1]))
    return copies


def test_dockerfile_installs_the_package_once_at_build_time() -> None:
    runs = " ".join(args for kw, args in _dockerfile() if kw == "RUN")
    assert "pip wheel" in runs
    assert "pip install" in runs
    assert "[postgres]" in runs, "the compose stack uses PostgreSQL (psycopg)"
    assert not re.search(r"pip install[^;&]*\s(-e|--editable)\b", runs)
    sources = {src.rstrip("/") for srcs, _ in _copies() for src in srcs}
    assert {"pyproject.toml", "README.md", "LICENSE", "celery_dgs"} <= sources
    # The build context holds exactly the files the Dockerfile copies.
    allowed = {
        line[1:].rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    for src in sources:
        assert (ROOT / src).exists(), src
        assert src in allowed, f"{src} is excluded by .dockerignore"


def test_app_commands_name_real_modules_and_the_published_metrics_port() -> None:
    import importlib

    from celery import Celery

    from celery_dgs.settings import DgsSettings

    services = _compose()["services"]
    workdir = [args for kw, args in _dockerfile() if kw == "WORKDIR"][-1]
    exposed = {
        args.split("/")[0] for kw, a in _dockerfile() if kw == "EXPOSE" for args in a.split()
    }
    nodes = set()
    for name in APP_SERVICES:
        command = services[name]["command"]
        options, settings = _celery_args(command)
        # -A resolves in the image's working directory, where the project is copied.
        module = options["-A"]
        top = module.split(".")[0]
        assert (ROOT / top).is_dir()
        assert ([top], f"./{top}") in _copies() or ([top], f"{workdir}/{top}") in _copies()
        app = importlib.import_module(module).app
        env = services[name]["environment"]
        assert env["DGS_EXAMPLE_DATABASE_URL"].startswith("postgresql+psycopg://")
        if "worker" in command:
            nodes.add(options["-n"])
            assert not settings
        else:
            assert command[command.index("-A") + 2] == "beat"
            scheduler_module, _, attr = options["-S"].partition(":")
            assert getattr(importlib.import_module(scheduler_module), attr)
            conf = Celery("compose-check").loader.cmdline_config_parser(settings)
            dgs = DgsSettings.from_conf({**app.conf, **conf})
            assert dgs.metrics_port is not None
            published = {str(p).rsplit(":", 1)[-1] for p in services[name]["ports"]}
            assert str(dgs.metrics_port) in published, "beat's metrics port is published"
            assert str(dgs.metrics_port) in exposed
    assert nodes == {"w1@node1", "w2@node2"}


def _compose_command() -> list[str] | None:
    """``docker compose`` (the plugin) or the standalone ``docker-compose``, if installed;
    ``config`` needs no Docker engine."""
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run(
            [docker, "compose", "version"], capture_output=True, timeout=30
        ).returncode
        == 0
    ):
        return [docker, "compose"]
    standalone = shutil.which("docker-compose")
    return [standalone] if standalone else None


def test_docker_compose_config_accepts_the_file() -> None:
    """The file is valid by the rules ``docker compose config`` applies, checked
    without Docker (tests/support/compose_file.py); where the compose plugin
    or docker-compose is installed, ``config`` itself accepts it too."""
    assert compose_problems(_compose(), ROOT) == []
    compose = _compose_command()
    if compose is None:  # e.g. a docker CLI without the compose plugin, as here
        return
    out = subprocess.run(
        [*compose, "-f", "docker-compose.yml", "config", "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr


def test_the_compose_check_sees_what_docker_compose_config_rejects() -> None:
    compose = _compose()
    services = compose["services"]
    services["beat"]["depends_on"] = {"broker": {"condition": "service_started"}}
    services["worker1"]["restart"] = "sometimes"
    services["worker2"]["volumes"] = ["cache:/root/.cache"]
    services["redis"]["healthcheck"]["interval"] = "2 seconds"
    services["postgres"]["commandd"] = ["postgres"]
    del services["redis"]["image"]
    compose["service"] = {}
    assert compose_problems(compose, ROOT) == [
        "unknown top-level key 'service'",
        "services.redis: needs an image or a build",
        "services.redis.healthcheck.interval: '2 seconds' is not a duration",
        "services.postgres: unknown key 'commandd'",
        "services.worker1.restart: 'sometimes' is not a restart policy",
        "services.worker2.volumes: named volume 'cache' is not declared",
        "services.beat.depends_on: no service 'broker'",
    ]


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

    @dgs.periodic(
        period=60,
        cooldown=10,
        configuration="fast",
        blackouts=[("01:00", "02:00")],
        dont_run_on_nodes=["n1"],
        pool="chrome",
        args=[1],
        kwargs={"k": "v"},
    )
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
