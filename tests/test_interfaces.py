"""The seams between beat and its backends are typed: no ``Any`` in the engine's
constructor, the rows it applies, or any method of the store, lease, registry
and dispatch interfaces; and each Redis class implements its interface."""

from __future__ import annotations

import inspect
import typing
from functools import cached_property
from typing import Any

import pytest

from celery_dgs.beat.engine import BeatEngine
from celery_dgs.beat.loading import ScheduleLoader
from celery_dgs.beat.reaper import RunReaper
from celery_dgs.beat.state import BeatState
from celery_dgs.dispatches import DispatchBackend, DispatchRecords
from celery_dgs.leases.base import BeatViewSource, LeaseBackend
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.leases.view import BeatViewReader
from celery_dgs.registry import RegistryBackend, WorkerRegistry
from celery_dgs.runtime import Runtime
from celery_dgs.store.base import ScheduleStore
from celery_dgs.store.sql import SqlScheduleStore

INTERFACES = [ScheduleStore, LeaseBackend, BeatViewSource, RegistryBackend, DispatchBackend]


def has_any(hint: object) -> bool:
    """Whether ``hint`` is ``Any`` or has it anywhere inside (``list[Any]``,
    ``Callable[[Any], None]``, ``X | Any``...)."""
    if hint is Any:
        return True
    if isinstance(hint, (list, tuple)):
        return any(has_any(h) for h in hint)
    return any(has_any(arg) for arg in typing.get_args(hint))


def untyped(func: Any) -> dict[str, object]:
    """The parameters (and ``return``) of ``func`` hinted with ``Any`` or not at all."""
    hints = typing.get_type_hints(func)
    bad = {name: hint for name, hint in hints.items() if has_any(hint)}
    for name in inspect.signature(func).parameters:
        if name not in ("self", "cls") and name not in hints:
            bad[name] = "no annotation"
    if "return" not in hints:
        bad["return"] = "no annotation"
    return bad


def test_has_any_finds_any_however_deep() -> None:
    assert has_any(Any)
    assert has_any(dict[str, list[Any]])
    assert has_any(typing.Callable[[Any], None])
    assert has_any(int | Any)
    assert not has_any(dict[str, typing.Callable[[int], str | None]])


@pytest.mark.parametrize(
    "func",
    [
        BeatEngine.__init__,
        ScheduleLoader.apply_row,
        ScheduleLoader.apply_row_safely,
        BeatEngine._read_state,
        RunReaper.__init__,
    ],
    ids=lambda f: f.__qualname__,
)
def test_the_engine_boundaries_have_no_any(func: Any) -> None:
    assert untyped(func) == {}


def test_the_engine_attributes_set_by_the_engine_have_no_any() -> None:
    hints = typing.get_type_hints(BeatState)
    assert {name: hint for name, hint in hints.items() if has_any(hint)} == {}


@pytest.mark.parametrize("interface", INTERFACES, ids=lambda c: c.__name__)
def test_every_interface_method_is_typed_without_any(interface: type) -> None:
    methods = {
        name: func
        for name, func in inspect.getmembers(interface, inspect.isfunction)
        if not (name.startswith("__") and name.endswith("__"))
    }
    assert methods
    bad = {name: found for name, func in methods.items() if (found := untyped(func))}
    assert bad == {}
    attributes = typing.get_type_hints(interface)
    assert {name: hint for name, hint in attributes.items() if has_any(hint)} == {}


@pytest.mark.parametrize(
    ("implementation", "interface"),
    [
        (SqlScheduleStore, ScheduleStore),
        (RedisLeases, LeaseBackend),
        (BeatViewReader, BeatViewSource),
        (WorkerRegistry, RegistryBackend),
        (DispatchRecords, DispatchBackend),
    ],
    ids=lambda c: c.__name__,
)
def test_each_implementation_implements_its_interface(
    implementation: type, interface: type
) -> None:
    assert issubclass(implementation, interface)
    assert not inspect.isabstract(implementation)


@pytest.mark.parametrize("name", ["redis", "leases", "registry", "dispatches", "store"])
def test_the_runtime_clients_are_typed(name: str) -> None:
    prop = inspect.getattr_static(Runtime, name)
    assert isinstance(prop, cached_property)
    assert untyped(prop.func) == {}
    if name in ("leases", "registry", "store"):  # the interfaces, not the Redis/SQL classes
        hint = typing.get_type_hints(prop.func)["return"]
        assert hint in INTERFACES
