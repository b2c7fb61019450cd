"""Who may change a stored schedule, and what ``sync``, ``upsert_runtime``
and ``remove_runtime`` (:class:`~celery_dgs.store.base.ScheduleStore`) do to
each name, decided by these pure functions so every store only reads and
writes: ``sync`` owns the declared rows, the runtime API its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from ..core.spec import ScheduleSpec, differing_fields
from ..errors import ScheduleConfigError
from .records import OWNER_DECLARED, OWNER_RUNTIME, SyncReport


def owned_by_sync(name: str) -> str:
    """Why the runtime API refuses to change the declared schedule ``name``."""
    return (
        f"schedule {name!r} is declared in code or dgs_schedules (owner 'declared'): "
        "only `sync` changes or removes it; change its declaration instead"
    )


def owned_by_api(name: str) -> str:
    """Why ``sync`` leaves the runtime schedule ``name`` alone although it is declared."""
    return (
        f"schedule {name!r} is a runtime schedule (owner 'runtime'): `sync` does not "
        f"change it; remove it (`celery dgs remove {name}`) before declaring it in code"
    )


def upsert_action(owner: str | None, active: bool, same_spec: bool) -> str:
    """What :meth:`~celery_dgs.store.base.ScheduleStore.upsert_runtime` does to
    a stored row of this ``owner`` (None: not stored) and ``active`` flag, whose
    spec equals the new one or not: one of the
    :class:`~celery_dgs.store.records.UpsertReport` list names. Every store
    applies this rule."""
    if owner is None:
        return "inserted"
    if not active:
        return "reactivated"
    if owner != OWNER_RUNTIME:
        return "refused"
    return "unchanged" if same_spec else "updated"


def state_unchanged(
    disabled_reason: str | None, stored_hint: datetime | None, new_hint: datetime | None
) -> bool:
    """Whether an upsert leaves a stored row's adaptive state as it is: the row
    is enabled and no new ``last_modified`` is given (an upsert of a disabled
    row enables it; a new hint is written). With an equal spec, the row is then
    ``unchanged``, else ``updated`` (:func:`upsert_action`)."""
    return disabled_reason is None and (new_hint is None or new_hint == stored_hint)


def remove_action(owner: str | None, active: bool) -> str:
    """What :meth:`~celery_dgs.store.base.ScheduleStore.remove_runtime` does to
    a stored row of this ``owner`` (None: not stored): one of the
    :class:`~celery_dgs.store.records.RemoveReport` list names."""
    if owner is None:
        return "absent"
    if owner != OWNER_RUNTIME:
        return "refused"
    return "removed" if active else "absent"


def sync_owns(owner: str, active: bool) -> bool:
    """Whether ``sync`` may change a stored row: any declared row, and an
    inactive (removed) runtime row, which a declaration takes over."""
    return owner == OWNER_DECLARED or not active


@dataclass(frozen=True, kw_only=True)
class SyncRowState:
    """What :func:`plan_sync` needs of a stored row."""

    owner: str
    active: bool
    #: Whether the stored spec is the declared one (``None``: not declared).
    same_spec: bool | None
    declaration_error: str | None


def plan_sync(
    declared: Sequence[str], rows: Mapping[str, SyncRowState], invalid: Mapping[str, str]
) -> tuple[SyncReport, list[str]]:
    """What every store's ``sync`` does, decided once: the report, and the
    stored rows whose ``declaration_error`` becomes ``invalid[name]``.

    ``rows``: the stored rows of the ``declared`` names and every active
    declared row (more rows do no harm). A declared name not stored is
    inserted; one ``sync`` may not change (:func:`sync_owns`) is refused; an
    inactive one is reactivated; one whose spec differs, or whose declaration
    was invalid, is updated. An active declared row not declared now stays as
    stored (``invalid``) when its declaration is invalid, else is deactivated.
    """
    report = SyncReport()
    for name in sorted(declared):
        row = rows.get(name)
        if row is None:
            report.inserted.append(name)
        elif not sync_owns(row.owner, row.active):
            report.refused.append(name)
        elif not row.active:
            report.reactivated.append(name)
        elif not row.same_spec or row.declaration_error is not None:
            report.updated.append(name)
        else:
            report.unchanged.append(name)
    names, marked = set(declared), []
    for name in sorted(rows):
        row = rows[name]
        if not row.active or name in names or row.owner != OWNER_DECLARED:
            continue
        if name in invalid:
            report.invalid.append(name)
            if row.declaration_error != invalid[name]:
                marked.append(name)
        else:
            report.deactivated.append(name)
    return report, marked


def declared_by_name(
    specs: Sequence[ScheduleSpec], invalid: Mapping[str, str]
) -> dict[str, ScheduleSpec]:
    """The declared ``specs`` by name, as every store's ``sync`` reads them.

    A name declared twice with identical fields counts once; with different
    fields it raises :class:`~celery_dgs.errors.ScheduleConfigError` naming the
    first field that differs. A name both declared and in ``invalid`` raises
    ``ValueError`` (the caller's declarations disagree with themselves).
    """
    declared: dict[str, ScheduleSpec] = {}
    for spec in specs:
        first = declared.get(spec.name)
        if first is None:
            declared[spec.name] = spec
            continue
        differ = differing_fields(first, spec)
        if differ:
            raise ScheduleConfigError(
                spec.name, differ[0], f"declared twice with different {', '.join(differ)}"
            )
    both = sorted(set(declared) & set(invalid))
    if both:
        raise ValueError(f"declared both valid and invalid: {', '.join(both)}")
    return declared
