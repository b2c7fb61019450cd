"""``celery -A proj dgs ...``: status, leases, run history and operator
actions on the deadline scheduler.

Registered as a Celery command plugin (entry point ``celery.commands``:
``dgs = celery_dgs.cli:dgs``), so it reuses Celery's ``-A``/``--app``,
``--broker`` and ``--no-color`` options.
"""

from __future__ import annotations

from typing import Any

import click

from .checks import checks
from .context import make_env
from .control import cancel, pause, resume, run
from .declare import check, sync
from .runtime import add, export, import_, remove
from .schema import schema
from .show import leases, runs
from .simulate import simulate
from .status_command import status
from .web import web

__all__ = ["dgs"]


@click.group()
@click.pass_context
def dgs(ctx: click.Context, /, **kwargs: Any) -> None:
    """celery-dgs: schedule conditions, live runs and operator actions.

    \b
    Exit status: 0 success; 1 a schedule in ERROR (status) or an invalid
    declaration (check, sync); 2 usage error or unknown schedule (remove
    says an absent name changed nothing, and exits 0); 3 Redis or the store
    unavailable; 4 configuration error (a dgs_* setting; sync: the store
    holds another project's declarations); 141 the reader of the output
    went away (| head).
    """
    make_env(ctx)


for command in (
    status,
    leases,
    runs,
    run,
    pause,
    resume,
    cancel,
    sync,
    check,
    simulate,
    add,
    remove,
    import_,
    export,
    checks,
    schema,
    web,
):
    dgs.add_command(command)
