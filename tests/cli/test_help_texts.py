"""Every option of every ``celery dgs`` command says what it does in ``--help``."""

from __future__ import annotations

from collections.abc import Iterator

import click

from celery_dgs.cli import dgs


def options(command: click.Command, path: str) -> Iterator[tuple[str, click.Option]]:
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            yield path, param
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from options(sub, f"{path} {name}")


def test_every_option_has_a_help_text() -> None:
    found = list(options(dgs, "dgs"))
    assert len(found) > 50  # the walk reached the subcommands
    missing = [f"{path} {'/'.join(opt.opts)}" for path, opt in found if not opt.help]
    assert missing == []
