"""``celery -A proj dgs web``: serve the status page (:mod:`celery_dgs.web`).

Importable without the ``web`` extra: the command then stops with a message
naming the extra to install.
"""

from __future__ import annotations

import logging
import socket
import sys

import click
import redis

from ..ops.env import Env
from .context import ConfigurationError, get_env, redis_failure, wrap_errors

#: What ``pip install`` needs for the page.
EXTRA = "celery-dgs[web]"


def parse_bind(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) or ``PORT`` alone (127.0.0.1)."""
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", value
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(
            f"expected HOST:PORT with a TCP port, got {value!r}", param_hint="--bind"
        )
    return host, int(port)


@click.command()
@click.option(
    "--bind",
    default="127.0.0.1:8377",
    show_default=True,
    metavar="HOST:PORT",
    help="Address to serve on (127.0.0.1: this machine only; another needs dgs_web_allowed_hosts).",
)
@click.option(
    "--refresh",
    type=click.FloatRange(min=0.5, max=3600),
    default=2.0,
    show_default=True,
    help="Seconds between the live parts' updates.",
)
@click.pass_context
@wrap_errors
def web(ctx: click.Context, bind: str, refresh: float) -> None:
    """Serve the status page: conditions, schedules, runs and leases, live.

    Read-only unless dgs_web_token is set: then an operator who signs in with
    the token may pause, resume, run now and cancel (each action is logged).
    """
    host, port = parse_bind(bind)
    try:
        import uvicorn

        from ..web.app import create_app
        from ..web.hosts import is_loopback_name
        from ..web.server import server_config
    except ImportError as exc:
        raise ConfigurationError(
            f"the status page needs the web extra: pip install '{EXTRA}' ({exc})"
        ) from None
    env = get_env(ctx)
    if not is_loopback_name(host) and not env.settings.web_allowed_hosts:
        raise ConfigurationError(
            f"--bind {bind} serves the page beyond this machine: set dgs_web_allowed_hosts "
            "to the host names it is reached by (requests for other names get 421)"
        )
    env.runtime  # noqa: B018 - build the clients once, before the server's threads
    _check_redis(env)
    app = create_app(env, refresh=refresh, max_age=min(refresh / 2, 1.0))
    _log_to_stderr(logging.getLogger("celery_dgs.web"))
    mode = "actions once signed in with dgs_web_token" if env.settings.web_token else "read-only"
    sock = _bound_socket(host, port)
    port = sock.getsockname()[1]
    click.echo(f"celery-dgs status page on http://{_url_host(host)}:{port}/ ({mode})")
    uvicorn.Server(server_config(app, host, port, log_level="warning")).run(sockets=[sock])


def _log_to_stderr(logger: logging.Logger) -> None:
    """The page's log (each action, sign-in and refusal: INFO and up) on
    stderr, unless the application's logging configuration already handles
    it (a handler on it or on the root logger)."""
    logger.setLevel(logging.INFO)
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[%(asctime)s: %(levelname)s] %(message)s"))
    logger.addHandler(handler)


def _check_redis(env: Env) -> None:
    """Stop before serving when Redis refuses the credentials (no page could
    be read: a configuration error, as every command says it); a Redis not
    reachable yet is a warning line, and the page answers 503 until it is."""
    try:
        env.runtime.redis.ping()
    except redis.RedisError as exc:
        shown, refused = redis_failure(exc)
        if refused:
            raise
        click.echo(f"warning: {shown}; the page answers 503 until it is reachable", err=True)


def _bound_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (as uvicorn binds one), so that an
    address in use is one line before the page's address is printed."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise click.ClickException(
            f"cannot serve on {_url_host(host)}:{port}: {exc.strerror or exc}"
        ) from None
    sock.set_inheritable(True)
    return sock


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
