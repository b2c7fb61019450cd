"""Seed 001's revisit groups (celery_dgs/core/revisit_groups.py): pure, times in seconds."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import timedelta

import pytest

from celery_dgs.core.index import DeadlineIndex
from celery_dgs.core.overload import RUN_REQUEST_PRIORITY_S
from celery_dgs.core.priority import PriorityIndex
from celery_dgs.core.ranking import OrderPolicy, RankingSources, build_index
from celery_dgs.core.revisit_groups import (
    DEFAULT_GROUP_SHARES,
    MODIFIED_SINCE_VISIT,
    NEVER_VISITED,
    OTHER,
    VCS_GROUP_SHARES,
    GroupIndex,
    GroupShares,
    GroupTurns,
    RevisitKey,
    parse_group_shares,
    revisit_key,
)
from celery_dgs.core.spec import AdaptiveSpec
from celery_dgs.core.stats import ScheduleStats
from celery_dgs.errors import SettingsError
from celery_dgs.settings import DgsSettings
from tests.core.helpers import periodic, utc

ALL = [True, True, True]


def picks(turns: GroupTurns, non_empty: list[bool], n: int) -> Counter[int]:
    out: Counter[int] = Counter()
    for _ in range(n):
        group = turns.order(non_empty)[0]
        turns.take(group)
        out[group] += 1
    return out


# -- shares and turns ----------------------------------------------------------------
def test_default_shares_are_swh_schedulers_default_policy_weights() -> None:
    assert DEFAULT_GROUP_SHARES.fractions() == pytest.approx((0.4, 0.4, 0.2))
    assert VCS_GROUP_SHARES.describe() == "49/49/2"
    assert DgsSettings().order_policy.group_shares == DEFAULT_GROUP_SHARES
    assert DgsSettings(adaptive_group_shares=None).order_policy.group_shares is None


def test_every_run_of_picks_follows_the_shares() -> None:
    turns = GroupTurns(DEFAULT_GROUP_SHARES)
    assert picks(turns, ALL, 1000) == {NEVER_VISITED: 400, MODIFIED_SINCE_VISIT: 400, OTHER: 200}
    for _ in range(7):  # any window of 5 consecutive picks: 2, 2, 1
        assert picks(turns, ALL, 5) == {NEVER_VISITED: 2, MODIFIED_SINCE_VISIT: 2, OTHER: 1}


@pytest.mark.parametrize(
    ("non_empty", "expected"),
    [
        ([False, True, True], {MODIFIED_SINCE_VISIT: 667, OTHER: 333}),
        ([True, False, True], {NEVER_VISITED: 667, OTHER: 333}),
        ([True, True, False], {NEVER_VISITED: 500, MODIFIED_SINCE_VISIT: 500}),
        ([False, False, True], {OTHER: 1000}),
    ],
)
def test_an_empty_groups_turns_go_to_the_others_in_proportion(
    non_empty: list[bool], expected: dict[int, int]
) -> None:
    assert picks(GroupTurns(DEFAULT_GROUP_SHARES), non_empty, 1000) == expected


def test_a_group_that_was_empty_takes_the_next_pick_and_saves_no_turns() -> None:
    turns = GroupTurns(VCS_GROUP_SHARES)
    picks(turns, [False, True, True], 997)  # a backlog of visited sources
    assert turns.order(ALL)[0] == NEVER_VISITED  # a new source: the next pick
    # ... and then its share, not the turns it missed while empty.
    assert picks(turns, ALL, 100)[NEVER_VISITED] in (49, 50)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ([40, 40, 20], "must be a mapping"),
        ({"never_visited": 1}, "missing: modified_since_visit, other"),
        ({"never_visited": 1, "modified_since_visit": 1, "other": 1, "x": 1}, "unknown: x"),
        ({"never_visited": -1, "modified_since_visit": 1, "other": 1}, "never_visited must be a"),
        ({"never_visited": 1, "modified_since_visit": "x", "other": 1}, "since_visit must be a"),
        ({"never_visited": 1, "modified_since_visit": 1, "other": float("nan")}, "other must be"),
        ({"never_visited": 0, "modified_since_visit": 0, "other": 0}, "at least one share"),
    ],
)
def test_bad_shares_get_an_error_naming_the_setting_and_the_group(
    value: object, words: str
) -> None:
    with pytest.raises(SettingsError, match=words) as err:
        DgsSettings(adaptive_group_shares=value)
    assert str(err.value).startswith("dgs_adaptive_group_shares: ")


def test_shares_from_a_mapping() -> None:
    shares = parse_group_shares({"never_visited": 49, "modified_since_visit": 49, "other": 2})
    assert shares == VCS_GROUP_SHARES
    assert parse_group_shares(shares) is shares


# -- which group ---------------------------------------------------------------------
SPEC = AdaptiveSpec(task="visit", configuration="a")
T0 = utc(2026, 1, 1)


def test_the_group_of_an_adaptive_schedule() -> None:
    new = ScheduleStats(registered_at=T0)
    assert revisit_key(SPEC, new) == RevisitKey(NEVER_VISITED, T0.timestamp())
    hinted_new = ScheduleStats(registered_at=T0, upstream_modified_at=T0 - timedelta(days=9))
    assert revisit_key(SPEC, hinted_new) == RevisitKey(
        NEVER_VISITED, (T0 - timedelta(days=9)).timestamp()
    )
    visited = ScheduleStats(
        registered_at=T0,
        last_good_start_at=T0 + timedelta(days=1),
        last_good_end_at=T0 + timedelta(days=1, minutes=1),
        next_target_at=T0 + timedelta(days=3),
        interval_index=2,
    )
    assert revisit_key(SPEC, visited) == RevisitKey(OTHER, (T0 + timedelta(days=3)).timestamp())
    older_hint = replace(visited, upstream_modified_at=T0)
    assert revisit_key(SPEC, older_hint) == RevisitKey(OTHER, (T0 + timedelta(days=3)).timestamp())
    newer = replace(visited, upstream_modified_at=T0 + timedelta(days=2))
    assert revisit_key(SPEC, newer) == RevisitKey(MODIFIED_SINCE_VISIT, -86400.0)
    assert revisit_key(periodic(), new) is None


# -- the index -----------------------------------------------------------------------
def grouped(
    keys: dict[str, RevisitKey | None], shares: GroupShares = DEFAULT_GROUP_SHARES
) -> GroupIndex:
    return GroupIndex(DeadlineIndex(), keys.get, shares)


def drain(ix: DeadlineIndex, now: float) -> list[str]:
    out = []
    while (name := ix.pop(now)) is not None:
        out.append(name)
    return out


def test_groups_choose_among_adaptive_picks_and_other_kinds_keep_their_place() -> None:
    keys: dict[str, RevisitKey | None] = {
        "new-old": RevisitKey(NEVER_VISITED, 1.0),
        "new-young": RevisitKey(NEVER_VISITED, 5.0),
        "hint-small": RevisitKey(MODIFIED_SINCE_VISIT, -10.0),
        "hint-big": RevisitKey(MODIFIED_SINCE_VISIT, -99.0),
        "rest-late": RevisitKey(OTHER, 50.0),
        "rest-soon": RevisitKey(OTHER, 20.0),
    }
    ix = grouped(keys)
    # should_start_by: the periodic one is second in the deadline order.
    ix.upsert("rest-late", 0, 1)
    ix.upsert("periodic", 0, 2)
    for i, name in enumerate(["rest-soon", "hint-small", "hint-big", "new-young", "new-old"]):
        ix.upsert(name, 0, 10 + i)
    order = drain(ix, 100)
    # Adaptive picks by turn (never visited, modified, other, never visited, modified),
    # each group's own order inside; the periodic schedule keeps its place.
    assert order == [
        "new-old",
        "periodic",
        "hint-big",
        "rest-soon",
        "new-young",
        "hint-small",
        "rest-late",
    ]
    assert ix.picks == [2, 2, 2]


def test_a_new_source_is_the_next_pick_under_a_backlog() -> None:
    keys: dict[str, RevisitKey | None] = {f"old{i}": RevisitKey(OTHER, float(i)) for i in range(50)}
    ix = grouped(keys)
    ix.upsert_many((f"old{i}", 0, float(i)) for i in range(50))
    assert [ix.pop(100) for _ in range(10)] == [f"old{i}" for i in range(10)]
    keys["new"] = RevisitKey(NEVER_VISITED, 100.0)
    ix.upsert("new", 100, 100 + 86400)  # eligible now, due in a day: last in deadline order
    assert ix.peek(100) == "new"
    assert ix.pop(100) == "new"
    assert ix.pop(100) == "old10"


def test_not_eligible_yet_is_not_chosen_and_run_requests_keep_their_place() -> None:
    keys: dict[str, RevisitKey | None] = {
        "later": RevisitKey(NEVER_VISITED, 0.0),
        "asked": RevisitKey(OTHER, 99.0),
        "rest": RevisitKey(OTHER, 1.0),
    }
    ix = grouped(keys)
    ix.upsert("later", 50, 60)
    ix.upsert("rest", 0, 30)
    ix.upsert("asked", 10, 10 - RUN_REQUEST_PRIORITY_S)  # an operator's run request
    assert ix.group_of("asked") is None
    assert drain(ix, 20) == ["asked", "rest"]
    assert ix.next_wakeup() == 50
    assert drain(ix, 50) == ["later"]
    assert len(ix) == 0


def test_pop_placeable_skips_what_cannot_be_placed_in_turn_order() -> None:
    keys: dict[str, RevisitKey | None] = {
        "new-elsewhere": RevisitKey(NEVER_VISITED, 0.0),
        "hint": RevisitKey(MODIFIED_SINCE_VISIT, 0.0),
        "rest": RevisitKey(OTHER, 0.0),
    }
    ix = grouped(keys)
    for i, name in enumerate(keys):
        ix.upsert(name, 0, i)
    here = {"hint", "rest"}
    assert ix.pop_placeable(0, here.__contains__) == "hint"
    assert ix.pop_placeable(0, here.__contains__) == "rest"
    assert ix.pop_placeable(0, here.__contains__) is None
    assert "new-elsewhere" in ix
    assert ix.pop(0) == "new-elsewhere"


def test_removed_and_reindexed_schedules_move_between_groups() -> None:
    keys: dict[str, RevisitKey | None] = {"a": RevisitKey(OTHER, 1.0), "b": RevisitKey(OTHER, 2.0)}
    ix = grouped(keys)
    ix.upsert("a", 0, 1)
    ix.upsert("b", 0, 2)
    assert ix.peek(0) == "a"
    keys["b"] = RevisitKey(MODIFIED_SINCE_VISIT, -5.0)  # a hint arrived: re-indexed
    ix.upsert("b", 0, 2)
    assert ix.group_of("b") == MODIFIED_SINCE_VISIT
    assert ix.remove("a")
    assert drain(ix, 0) == ["b"]


def test_build_index_puts_the_groups_under_the_priority_classes() -> None:
    sources = RankingSources(
        expected_s=lambda n: 1.0,
        margin_s=lambda n: 1.0,
        priority_of=lambda n: 50,
        revisit_key_of=lambda n: RevisitKey(OTHER, 0.0),
    )
    index = build_index(OrderPolicy(), sources)
    assert isinstance(index, PriorityIndex)
    assert isinstance(index.main, GroupIndex)
    plain = build_index(OrderPolicy(group_shares=None), sources)
    assert not isinstance(plain.main, GroupIndex)
