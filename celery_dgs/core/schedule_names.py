"""Schedule names: ``task`` or ``task@configuration``, and a deferred check's
key (its configuration is ``check:<key>``). Invalid names raise
:class:`~celery_dgs.errors.ScheduleConfigError` naming the schedule and field.
"""

from __future__ import annotations

from typing import Any

from ..errors import ScheduleConfigError

#: A deferred check's configuration is this prefix and its key: the check of
#: ``task`` for key ``k`` is the schedule ``task@check:k``.
CHECK_CONFIGURATION_PREFIX = "check:"
#: The longest key a deferred check may have (its name must fit the store's 255).
MAX_CHECK_KEY_LENGTH = 200


def schedule_name(task: str, configuration: str = "") -> str:
    """``task`` for the default configuration, ``task@configuration`` otherwise."""
    return f"{task}@{configuration}" if configuration else task


def split_schedule_name(name: str) -> tuple[str, str]:
    """Inverse of :func:`schedule_name`."""
    task, _, configuration = name.partition("@")
    return task, configuration


def is_check_name(name: str) -> bool:
    """Whether ``name`` is a deferred check's (``task@check:key``)."""
    return split_schedule_name(name)[1].startswith(CHECK_CONFIGURATION_PREFIX)


def check_schedule_name(task: Any, configuration: Any, *, check: bool = False) -> str:
    """The schedule name of ``task``/``configuration``; ScheduleConfigError if invalid.

    Only a deferred check's configuration (``check=True``) starts with
    :data:`CHECK_CONFIGURATION_PREFIX`, and only its key may contain ``@``
    (the name splits at the first ``@``, which is after the task)."""
    name = schedule_name(task, configuration) if isinstance(task, str) else repr(task)
    if not isinstance(task, str) or not task.strip() or "@" in task:
        raise ScheduleConfigError(name, "task", "must be a non-empty task name without '@'")
    if not isinstance(configuration, str) or ("@" in configuration and not check):
        raise ScheduleConfigError(name, "configuration", "must be a string without '@'")
    if configuration.startswith(CHECK_CONFIGURATION_PREFIX) != check:
        raise ScheduleConfigError(
            name,
            "configuration",
            f"must not start with {CHECK_CONFIGURATION_PREFIX!r} (the names of deferred checks)",
        )
    return name


def check_key(task: Any, key: Any) -> str:
    """``key`` as a deferred check's key: a non-empty string of at most
    :data:`MAX_CHECK_KEY_LENGTH` characters (ints are accepted and written in
    decimal); ScheduleConfigError naming the check and field ``key`` otherwise."""
    if isinstance(key, int) and not isinstance(key, bool):
        key = str(key)
    name = f"{task}@{CHECK_CONFIGURATION_PREFIX}{key}"
    if not isinstance(key, str) or not key.strip():
        raise ScheduleConfigError(name, "key", f"must be a non-empty string, got {key!r}")
    if len(key) > MAX_CHECK_KEY_LENGTH or any(ch in key for ch in "\x00\n\r"):
        if len(key) > MAX_CHECK_KEY_LENGTH:  # named by its start, not repeated whole
            name = f"{task}@{CHECK_CONFIGURATION_PREFIX}{key[:40]}..."
        raise ScheduleConfigError(
            name,
            "key",
            f"must be at most {MAX_CHECK_KEY_LENGTH} characters on one line, got {len(key)}",
        )
    return key
