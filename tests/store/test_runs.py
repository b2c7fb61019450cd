"""Runs: outcome → statistics, fencing, idempotency, skips, progress, history, pruning."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import event

from celery_dgs.errors import StaleTokenError, UnknownRunError, UnknownScheduleError
from celery_dgs.store import ScheduleStore, SqlScheduleStore
from tests.support.statements import statements_sent

from .conftest import T0, periodic, start

S = timedelta(seconds=1)


@pytest.fixture
def one(store: ScheduleStore) -> ScheduleStore:
    store.sync([periodic("a"), periodic("b")], T0)
    return store


def test_start_records_the_run_and_the_token_in_one_go(one: ScheduleStore) -> None:
    seq = one.get("a").change_seq
    start(one, "a", "r1", token=5, at=T0 + 3 * S)
    got = one.get("a")
    assert got.current_token == 5
    assert got.stats.last_start_at == T0 + 3 * S
    assert got.change_seq > seq
    assert got.stats.failure_count is None
    [run] = one.running_runs()
    assert (run.run_id, run.schedule, run.token, run.outcome) == ("r1", "a", 5, "running")
    assert (run.dispatch_id, run.owner_node, run.owner_tag) == ("d-r1", "node-1", "r1")
    assert run.ended_at is None
    assert run.duration is None
    assert not run.fenced
    start(one, "a", "r1", token=6)  # the same run_id again: nothing changes
    assert one.get("a") == got
    assert len(one.runs("a")) == 1


def test_ewma_and_outcome_mapping(one: ScheduleStore) -> None:
    alpha = 0.37
    averages: list[timedelta] = []
    for i, seconds in enumerate([10, 20, 30]):
        at = T0 + timedelta(hours=i)
        start(one, "a", f"ok{i}", token=i + 1, at=at)
        got = one.record_run_end(run_id=f"ok{i}", outcome="success", ended_at=at + seconds * S)
        assert got.stats.average_good_duration is not None
        averages.append(got.stats.average_good_duration)
    assert averages[0] == 10 * S
    assert averages[1].total_seconds() == pytest.approx(alpha * 20 + (1 - alpha) * 10)  # 13.7
    assert averages[2].total_seconds() == pytest.approx(alpha * 30 + (1 - alpha) * 13.7)  # 19.731
    good = one.get("a").stats
    assert good.duration_deviation is not None  # |20-10|, then |30-13.7|: stored, reloaded
    assert good.duration_deviation.total_seconds() == pytest.approx(
        alpha * 16.3 + (1 - alpha) * 3.7
    )
    [loaded] = [s for s in one.changes_since(0)[0] if s.name == "a"]  # the loader's path
    assert loaded.stats == good
    assert good.failure_count == 0
    assert good.last_good_end_at == T0 + timedelta(hours=2) + 30 * S

    token = 10
    for outcome, failures in [
        ("failure", 1),
        ("terminated", 2),
        ("lost", 3),
        ("stolen", 3),
        ("cancelled", 3),
        ("yielded", 3),
    ]:
        token += 1
        at = T0 + timedelta(hours=token)
        start(one, "a", outcome, token=token, at=at)
        stats = one.record_run_end(run_id=outcome, outcome=outcome, ended_at=at + 5 * S).stats
        assert stats.failure_count == failures, outcome
        assert (stats.last_start_at, stats.last_end_at) == (at, at + 5 * S)
        assert stats.average_good_duration == averages[2]  # only successes feed the average
        assert stats.last_good_start_at == good.last_good_start_at
    start(one, "a", "back", token=99, at=T0 + timedelta(days=2))
    stats = one.record_run_end(
        run_id="back", outcome="success", ended_at=T0 + timedelta(days=2, seconds=4), alpha=0.5
    ).stats
    assert stats.failure_count == 0
    assert stats.average_good_duration is not None
    assert stats.average_good_duration.total_seconds() == pytest.approx(0.5 * 4 + 0.5 * 19.731)
    outcomes = {r.run_id: r.outcome for r in one.runs("a")}
    assert outcomes["lost"] == "lost"
    assert outcomes["ok0"] == "success"


def test_fencing_keeps_the_run_record_but_refuses_stale_stats(one: ScheduleStore) -> None:
    start(one, "a", "old", token=1)
    start(one, "a", "new", token=2, at=T0 + 60 * S)  # the lease was taken over
    before = one.get("a")
    with pytest.raises(StaleTokenError, match=r"token 1.*current token is 2"):
        one.record_run_end(run_id="old", outcome="success", ended_at=T0 + 90 * S, error=None)
    after = one.get("a")
    assert after == before  # stats, token and change_seq untouched
    old = next(r for r in one.runs("a") if r.run_id == "old")
    assert old.outcome == "success"
    assert old.ended_at == T0 + 90 * S
    assert old.fenced
    assert old.duration_s == 90.0
    with pytest.raises(StaleTokenError):  # asked again: same answer, nothing changes
        one.record_run_end(run_id="old", outcome="failure", ended_at=T0 + 99 * S)
    assert one.get("a") == before
    assert next(r for r in one.runs("a") if r.run_id == "old") == old
    good = one.record_run_end(run_id="new", outcome="success", ended_at=T0 + 70 * S)
    assert good.stats.last_good_start_at == T0 + 60 * S
    assert good.current_token == 2


def test_record_run_end_is_idempotent(one: ScheduleStore) -> None:
    start(one, "a", "r1", token=1)
    first = one.record_run_end(
        run_id="r1", outcome="failure", ended_at=T0 + 5 * S, error="boom", progress=0.5
    )
    run = one.runs("a")[0]
    again = one.record_run_end(run_id="r1", outcome="success", ended_at=T0 + 9 * S)
    assert again == first == one.get("a")
    assert first.stats.failure_count == 1
    assert one.runs("a") == [run]
    assert (run.outcome, run.error, run.progress, run.duration_s) == ("failure", "boom", 0.5, 5.0)


def test_bad_calls(one: ScheduleStore) -> None:
    with pytest.raises(UnknownRunError, match="'ghost'"):
        one.record_run_end(run_id="ghost", outcome="success", ended_at=T0)
    start(one, "a", "r1", token=1)
    for outcome in ("running", "skipped", "exploded"):
        with pytest.raises(ValueError, match="outcome must be one of"):
            one.record_run_end(run_id="r1", outcome=outcome, ended_at=T0)
    with pytest.raises(ValueError, match="finite"):
        one.record_run_end(run_id="r1", outcome="success", ended_at=T0, progress=float("nan"))
    assert one.running_runs()[0].outcome == "running"


def test_skips_progress_and_history_order(one: ScheduleStore) -> None:
    before = one.get("a")
    one.record_skip(
        schedule="a",
        run_id="s1",
        dispatch_id="d1",
        owner_node="n",
        owner_name="w@n",
        reason="lease held by w2@n",
        at=T0,
    )
    one.record_skip(
        schedule="a",
        run_id="s1",
        dispatch_id="d1",
        owner_node="n",
        owner_name="w@n",
        reason="again",
        at=T0,
    )
    assert one.get("a") == before  # skips leave the schedule alone
    [skip] = one.runs("a")
    assert (skip.outcome, skip.error, skip.token, skip.ended_at) == (
        "skipped",
        "lease held by w2@n",
        None,
        T0,
    )
    start(one, "a", "r1", token=1, at=T0 + S)
    start(one, "b", "r2", token=1, at=T0 + 2 * S)
    assert [(r.run_id, r.progress) for r in one.running_runs()] == [("r1", None), ("r2", None)]
    one.record_run_end(run_id="r1", outcome="success", ended_at=T0 + 3 * S, progress=0.25)
    assert one.runs("a")[0].progress == 0.25
    assert [r.run_id for r in one.runs("a")] == ["r1", "s1"]
    assert [r.run_id for r in one.runs("a", limit=1)] == ["r1"]
    assert [r.run_id for r in one.running_runs()] == ["r2"]
    assert one.runs("b")[0].duration is None


def _runs_to_prune(one: ScheduleStore) -> None:
    for i in range(25):
        one.record_skip(
            schedule="a",
            run_id=f"s{i}",
            dispatch_id=None,
            owner_node="n",
            owner_name="w",
            reason="x",
            at=T0 + i * S,
        )
    start(one, "b", "still-running", token=1, at=T0 - timedelta(days=30))


def test_prune_deletes_finished_runs_in_batches_one_transaction_each(
    sql_store: SqlScheduleStore,
) -> None:
    sql_store.sync([periodic("a"), periodic("b")], T0)
    _runs_to_prune(sql_store)
    commits: list[int] = []
    event.listen(sql_store.engine, "commit", lambda conn: commits.append(1))
    assert sql_store.prune_runs(T0 + 23 * S, batch_size=10) == 23
    assert len(commits) == 3  # 10 + 10 + 3, one transaction each
    assert [r.run_id for r in sql_store.runs("a")] == ["s24", "s23"]


def test_prune_deletes_finished_runs(one: ScheduleStore) -> None:
    _runs_to_prune(one)
    assert one.prune_runs(T0 + 23 * S, batch_size=10) == 23
    assert [r.run_id for r in one.runs("a")] == ["s24", "s23"]
    assert [r.run_id for r in one.running_runs()] == ["still-running"]
    assert one.prune_runs(T0 + timedelta(days=1), batch_size=2) == 2
    assert one.prune_runs(T0 + timedelta(days=1)) == 0
    with pytest.raises(ValueError, match="batch_size"):
        one.prune_runs(T0, batch_size=0)


def test_durable_floor_refuses_a_start_whose_token_is_not_above_the_recorded_one(
    one: ScheduleStore,
) -> None:
    """A Redis that lost its counter may grant a token again: the store refuses
    to start it, but keeps the attempt in the history (a fenced skip)."""
    assert one.token_floor("a") == 0
    start(one, "a", "r5", token=5)
    assert one.token_floor("a") == 5
    before = one.get("a")
    for run_id, token in (("again", 5), ("lower", 3)):
        with pytest.raises(StaleTokenError, match=rf"stale token {token}.*token 5"):
            start(one, "a", run_id, token=token, at=T0 + 9 * S)
        assert one.get("a") == before  # floor, stats and change_seq untouched
        row = next(r for r in one.runs("a") if r.run_id == run_id)
        assert (row.outcome, row.fenced, row.token, row.ended_at) == (
            "skipped",
            True,
            token,
            T0 + 9 * S,
        )
        assert "not started" in (row.error or "")
    assert [r.run_id for r in one.running_runs()] == ["r5"]
    start(one, "a", "r6", token=6, at=T0 + 10 * S)
    assert one.token_floor("a") == 6
    with pytest.raises(UnknownScheduleError):
        one.token_floor("ghost")


def test_granted_tokens_samples_the_schedules_that_ran(one: ScheduleStore) -> None:
    """What ``status`` compares with Redis's counters after a restart."""
    assert one.granted_tokens(10) == {}
    start(one, "a", "r5", token=5)
    start(one, "b", "r7", token=7)
    assert one.granted_tokens(10) == {"a": 5, "b": 7}
    assert len(one.granted_tokens(1)) == 1
    start(one, "a", "r6", token=6, at=T0 + 60 * S)  # ran again since: its token is 6 now
    assert one.granted_tokens(10, started_before=T0 + 30 * S) == {"a": 6, "b": 7}
    assert one.granted_tokens(10, started_before=T0) == {}
    assert one.granted_tokens(10, started_before=T0 + 90 * S) == {"a": 6, "b": 7}


def test_granted_tokens_reads_the_latest_runs_not_the_fleet(sql_store: SqlScheduleStore) -> None:
    """Among 20,000 schedules that never ran, the two that did are found by
    an index read of the latest runs: the schedules' table is not scanned."""
    sql_store.upsert_runtime(
        [periodic("never", str(i)) for i in range(20_000)] + [periodic("a"), periodic("b")], T0
    )
    start(sql_store, "a", "r5", token=5)
    start(sql_store, "b", "r7", token=7)
    with sql_store.engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE")
        conn.commit()
    with statements_sent(sql_store.engine, "SELECT") as sent:
        assert sql_store.granted_tokens(10) == {"a": 5, "b": 7}
    [(statement, parameters)] = sent
    explain = "EXPLAIN QUERY PLAN" if sql_store.engine.dialect.name == "sqlite" else "EXPLAIN"
    with sql_store.engine.connect() as conn:
        plan = "\n".join(
            str(r[-1]) for r in conn.exec_driver_sql(f"{explain} {statement}", parameters)
        )
    assert "SCAN dgs_schedules" not in plan, plan
    assert "Seq Scan on dgs_schedules" not in plan, plan


def test_running_runs_page_pages_by_row_id(one: ScheduleStore) -> None:
    """Beat's reaper pages through the running runs: ``id`` above the last one
    seen, in ``id`` order, ended and skipped runs left out."""
    for i in range(5):
        start(one, "a" if i % 2 else "b", f"r{i}", token=i + 1, at=T0 - i * S)
    one.record_skip(
        schedule="a",
        run_id="skip",
        dispatch_id=None,
        owner_node="n",
        owner_name="w",
        reason="x",
        at=T0,
    )
    one.record_run_end(run_id="r4", outcome="success", ended_at=T0 + S)
    first = one.running_runs_page(after_id=0, limit=2)
    assert [r.run_id for r in first] == ["r0", "r1"]
    assert first[0].id < first[1].id
    rest = one.running_runs_page(after_id=first[-1].id, limit=10)
    assert [r.run_id for r in rest] == ["r2", "r3"]
    assert one.running_runs_page(after_id=rest[-1].id, limit=10) == []
    assert [r.run_id for r in one.running_runs()] == ["r3", "r2", "r1", "r0"]  # oldest first
    with pytest.raises(ValueError, match="limit"):
        one.running_runs_page(after_id=0, limit=0)


def test_outcome_counts(one: ScheduleStore) -> None:
    assert one.outcome_counts() == {}
    start(one, "a", "r1", token=1)
    start(one, "b", "r2", token=1)
    one.record_run_end(run_id="r1", outcome="failure", ended_at=T0 + S)
    with pytest.raises(StaleTokenError):
        start(one, "a", "r3", token=1)
    assert one.outcome_counts() == {"failure": 1, "running": 1, "skipped": 1}
