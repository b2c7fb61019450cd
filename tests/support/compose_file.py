"""What ``docker compose config`` rejects in a compose file, checked without
Docker: the file read with PyYAML (anchors and ``<<`` merges resolved), then
the Compose specification's rules for the parts a file like ours uses: known
top-level and service keys, an image or a build per service, a build context
and Dockerfile that exist, ``depends_on`` naming services (``service_healthy``
only on one with a healthcheck), healthcheck, restart, port, volume and
environment forms, and named volumes declared at the top level.

:func:`compose_problems` returns one line per problem (an empty list: the file
is valid as far as these rules go).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

TOP_LEVEL = {"version", "name", "services", "networks", "volumes", "configs", "secrets"}
SERVICE_KEYS = (
    {"build", "image", "command", "entrypoint", "environment", "env_file", "ports", "expose"}
    | {"volumes", "depends_on", "healthcheck", "restart", "networks", "labels", "user"}
    | {"container_name", "hostname", "working_dir", "deploy", "profiles", "logging", "ulimits"}
    | {"stop_grace_period", "stop_signal", "init", "tty", "stdin_open", "extra_hosts", "dns"}
    | {"cap_add", "cap_drop", "secrets", "configs", "platform", "pull_policy", "shm_size"}
    | {"tmpfs", "mem_limit", "cpus", "read_only", "security_opt", "sysctls", "devices"}
)
BUILD_KEYS = {"context", "dockerfile", "args", "target", "labels", "cache_from", "network"}
HEALTHCHECK_KEYS = {"test", "interval", "timeout", "retries", "start_period", "disable"}
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
RESTART = re.compile(r"^(no|always|unless-stopped|on-failure(:\d+)?)$")
DURATION = re.compile(r"^(\d+(\.\d+)?(us|ms|s|m|h))+$")
PORT = re.compile(r"^((\d{1,3}\.){3}\d{1,3}:)?(\d+(-\d+)?:)?\d+(-\d+)?(/(tcp|udp|sctp))?$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def load_compose(path: Path) -> dict[str, Any]:
    compose = yaml.safe_load(path.read_text())
    if not isinstance(compose, dict):
        raise ValueError(f"{path}: not a mapping")
    return compose


def compose_problems(compose: dict[str, Any], project_dir: Path) -> list[str]:
    problems = [
        f"unknown top-level key {key!r}"
        for key in compose
        if key not in TOP_LEVEL and not str(key).startswith("x-")
    ]
    services = compose.get("services")
    if not isinstance(services, dict) or not services:
        return [*problems, "services: a non-empty mapping is required"]
    volumes = compose.get("volumes") or {}
    for name, service in services.items():
        where = f"services.{name}"
        if not isinstance(service, dict):
            problems.append(f"{where}: must be a mapping")
            continue
        problems += [f"{where}: unknown key {k!r}" for k in service if k not in SERVICE_KEYS]
        if "image" not in service and "build" not in service:
            problems.append(f"{where}: needs an image or a build")
        problems += _build(where, service.get("build"), project_dir)
        problems += _depends_on(where, service.get("depends_on"), services)
        problems += _healthcheck(where, service.get("healthcheck"))
        restart = service.get("restart")
        if restart is not None and not RESTART.match(str(restart)):
            problems.append(f"{where}.restart: {restart!r} is not a restart policy")
        for key in ("command", "entrypoint"):
            value = service.get(key)
            if value is not None and not (
                isinstance(value, str)
                or (isinstance(value, list) and all(isinstance(v, str) for v in value))
            ):
                problems.append(f"{where}.{key}: a string or a list of strings, got {value!r}")
        problems += [
            f"{where}.ports: {p!r} is not a port mapping"
            for p in service.get("ports", [])
            if not PORT.match(str(p))
        ]
        problems += _volumes(where, service.get("volumes", []), volumes)
        problems += _environment(where, service.get("environment"))
    return problems


def _build(where: str, build: Any, project_dir: Path) -> list[str]:
    if build is None:
        return []
    if isinstance(build, str):
        build = {"context": build}
    if not isinstance(build, dict):
        return [f"{where}.build: a path or a mapping, got {build!r}"]
    problems = [f"{where}.build: unknown key {k!r}" for k in build if k not in BUILD_KEYS]
    context = project_dir / str(build.get("context", "."))
    if not context.is_dir():
        problems.append(f"{where}.build.context: {context} is not a directory")
    elif not (context / str(build.get("dockerfile", "Dockerfile"))).is_file():
        problems.append(f"{where}.build.dockerfile: not found in {context}")
    return problems


def _depends_on(where: str, depends_on: Any, services: dict[str, Any]) -> list[str]:
    if depends_on is None:
        return []
    if isinstance(depends_on, list):
        depends_on = {name: {"condition": "service_started"} for name in depends_on}
    if not isinstance(depends_on, dict):
        return [f"{where}.depends_on: a list or a mapping, got {depends_on!r}"]
    problems = []
    for name, spec in depends_on.items():
        condition = (spec or {}).get("condition", "service_started")
        if name not in services:
            problems.append(f"{where}.depends_on: no service {name!r}")
        elif condition not in CONDITIONS:
            problems.append(f"{where}.depends_on.{name}: unknown condition {condition!r}")
        elif condition == "service_healthy" and "healthcheck" not in services[name]:
            problems.append(f"{where}.depends_on.{name}: service_healthy, but no healthcheck")
    return problems


def _healthcheck(where: str, check: Any) -> list[str]:
    if check is None:
        return []
    if not isinstance(check, dict):
        return [f"{where}.healthcheck: must be a mapping"]
    problems = [
        f"{where}.healthcheck: unknown key {k!r}" for k in check if k not in HEALTHCHECK_KEYS
    ]
    test = check.get("test")
    if isinstance(test, list) and (not test or test[0] not in ("CMD", "CMD-SHELL", "NONE")):
        problems.append(f"{where}.healthcheck.test: a list starts with CMD, CMD-SHELL or NONE")
    elif not isinstance(test, (list, str)) and not check.get("disable"):
        problems.append(f"{where}.healthcheck.test: a string or a list is required")
    for key in ("interval", "timeout", "start_period"):
        if key in check and not DURATION.match(str(check[key])):
            problems.append(f"{where}.healthcheck.{key}: {check[key]!r} is not a duration")
    retries = check.get("retries", 0)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        problems.append(f"{where}.healthcheck.retries: {retries!r} is not a count")
    return problems


def _volumes(where: str, mounts: Any, declared: dict[str, Any]) -> list[str]:
    problems = []
    for mount in mounts if isinstance(mounts, list) else [mounts]:
        if not isinstance(mount, str):
            continue  # the long form: a mapping
        source, sep, _target = mount.partition(":")
        if not sep:
            continue  # an anonymous volume
        if not source.startswith((".", "/", "~")) and source not in declared:
            problems.append(f"{where}.volumes: named volume {source!r} is not declared")
    return problems


def _environment(where: str, env: Any) -> list[str]:
    if env is None:
        return []
    if isinstance(env, list):
        env = dict(str(item).partition("=")[::2] for item in env)
    if not isinstance(env, dict):
        return [f"{where}.environment: a mapping or a list, got {env!r}"]
    return [
        f"{where}.environment: {name!r}={value!r} is not a variable"
        for name, value in env.items()
        if not ENV_NAME.match(str(name))
        or not (value is None or isinstance(value, (str, int, float, bool)))
    ]
