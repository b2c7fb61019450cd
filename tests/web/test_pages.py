"""The status page served for real (uvicorn over HTTP) on a real SQLite store
and a real Redis-compatible server: the same numbers as ``celery dgs
status --json``, paging and filters, one schedule's page, the leases page,
escaping, and no password on an error page."""

from __future__ import annotations

import html
import json
import re
import time
from datetime import datetime, timedelta
from typing import Any

import pytest
import redis

from celery_dgs.keys import KeySpace
from celery_dgs.leases.leader import RedisLeader
from celery_dgs.web import pages
from tests.cli.conftest import PREFIX, now, spec
from tests.web.conftest import WebWorld, free_port, make_web_app

H = timedelta(hours=1)
M = timedelta(minutes=1)


@pytest.fixture
def fleet(web: WebWorld) -> datetime:
    """Schedules (period 1 h) in known conditions, a worker with 2 slots, one
    live run at 40 %."""
    t = now()
    web.sync(
        spec("t.ok"),
        spec("t.late"),
        spec("t.never", pool="slow"),
        spec("t.failed"),
        spec("t.running"),
        at=t - 2 * H,
    )
    web.record("t.ok", "success", t - 10 * M, 2.0)
    web.record("t.ok", "success", t - 70 * M, 4.0)
    web.record("t.late", "success", t - 150 * M)
    web.record("t.failed", "success", t - 30 * M)
    web.record("t.failed", "failure", t - 5 * M, error="boom <b>bold</b>\nsecond line")
    web.record("t.running", "success", t - 20 * M)
    web.record("t.running", "running", t - 10 * M)
    web.register_worker("w1@node1", slots=2)  # before its run's lease, as a worker does
    web.hold_lease("t.running", progress=0.4)
    return t


def test_overview_numbers_match_status_json(web: WebWorld, fleet: datetime) -> None:
    site = web.serve()
    cli = json.loads(web.invoke("status", "--json").output)
    api = json.loads(site.get("/api/overview").body)
    assert api["counts"] == cli["counts"]
    assert sum(api["counts"].values()) == 5
    assert api["counts"]["ERROR"] >= 2  # t.late (deadline passed), t.never (never succeeded)
    assert api["workers"] == [{"name": "w1@node1", "slots": 2, "busy": 1, "free": 1}]
    assert api["pending_dispatches"] == 0
    assert sum(api["histogram"].values()) == 5
    assert api["histogram"]["in ERROR"] == api["counts"]["ERROR"]
    page = site.get("/")
    assert page.status == 200
    for level, n in cli["counts"].items():
        assert f'data-count="{level}">{n}<' in page.body
    assert "deadline_passed" in page.body
    assert "never_succeeded" in page.body
    assert "no beat leader" in page.body
    assert page.headers["content-security-policy"].startswith("default-src 'self'")


def test_the_overview_says_each_pools_slots_and_which_are_all_busy(
    web: WebWorld, fleet: datetime
) -> None:
    site = web.serve()
    assert json.loads(site.get("/api/overview").body)["queues"] == [
        {"queue": "celery", "workers": 1, "slots": 2, "busy": 1}
    ]
    assert "data-queue=" not in site.get("/").body  # one pool: its slots are the total
    web.register_worker("w1@slownode", slots=1, queues=("slow",))
    web.hold_lease("t.never", node="slownode")
    site = web.serve()  # a new page server: no overview kept from before
    assert json.loads(site.get("/api/overview").body)["queues"] == [
        {"queue": "celery", "workers": 1, "slots": 2, "busy": 1},
        {"queue": "slow", "workers": 1, "slots": 1, "busy": 1},
    ]
    page = site.get("/").body
    assert '<li data-queue="celery">celery 2 slots (1 busy)</li>' in page
    assert '<li data-queue="slow" class="full">slow 1 slot (all busy)</li>' in page


def test_a_restarted_workers_slots_hold_none_of_its_earlier_instances_runs(
    web: WebWorld, fleet: datetime, redis_client: redis.Redis
) -> None:
    """``kill -9`` and a process manager restarting ``w1@node1``: the lease
    its earlier instance last pinged before the new one registered takes
    none of the new instance's slots, as beat counts them."""
    from celery_dgs.keys import KeySpace
    from tests.cli.conftest import PREFIX

    key = KeySpace(PREFIX).lease("t.running")
    ms = int(redis_client.hget(key, "last_ping_at") or 0)
    redis_client.hset(key, "last_ping_at", ms - 2_000)  # within ping_timeout (5 s)
    web.register_worker("w1@node1", slots=2)  # the new instance
    api = json.loads(web.serve().get("/api/overview").body)
    assert api["workers"] == [{"name": "w1@node1", "slots": 2, "busy": 0, "free": 2}]
    assert api["queues"] == [{"queue": "celery", "workers": 1, "slots": 2, "busy": 0}]


def test_overview_shows_the_beat_leader_and_its_token(
    web: WebWorld, fleet: datetime, redis_client: redis.Redis
) -> None:
    from celery_dgs.keys import KeySpace
    from celery_dgs.leases.leader import RedisLeader
    from tests.cli.conftest import PREFIX

    leader = RedisLeader(redis_client, KeySpace(PREFIX), timeout=30.0)
    grant = leader.elect(owner_tag="beat-tag", owner_node="beat-node", owner_pid=4242)
    site = web.serve()
    cli = json.loads(web.invoke("status", "--json").output)["beat_leader"]
    api = json.loads(site.get("/api/overview").body)["beat_leader"]
    assert api["token"] == cli["token"] == grant.token
    body = site.get("/").body
    assert "beat-node/4242" in body
    assert f"data-leader-token>{grant.token}<" in body


def test_schedules_table_pages_filters_and_sorts_most_urgent_first(web: WebWorld) -> None:
    t = now()
    names = [f"proj.scrape_{i:03d}" for i in range(120)]
    web.sync(
        *(spec(n, pool="slow" if i % 3 == 0 else None) for i, n in enumerate(names)),
        spec("other.report"),
        at=t - 2 * H,
    )
    for i, name in enumerate(names):  # older good runs reach ERROR sooner
        web.record(name, "success", t - timedelta(minutes=i % 50))
    site = web.serve()

    def listed(body: str) -> list[str]:
        return [html.unescape(n) for n in re.findall(r'class="name" href="[^"]*">([^<]*)<', body)]

    first = site.get("/schedules")
    rows = listed(first.body)
    assert len(rows) == 50
    assert "<b data-total>121</b>" in first.body
    assert "page 1 of 3" in first.body
    assert rows[0] == "other.report"  # never succeeded: ERROR, first
    ages = [int(n[-3:]) % 50 for n in rows[1:]]
    assert ages == sorted(ages, reverse=True)  # oldest good start = nearest error_at first
    third = listed(site.get("/schedules?page=3").body)
    assert len(third) == 21
    assert set(rows).isdisjoint(third)

    assert listed(site.get("/schedules?q=proj.scrape_01*").body) == [
        n
        for n in sorted(names, key=lambda n: (-(int(n[-3:]) % 50), n))
        if n.startswith("proj.scrape_01")
    ]
    slow = listed(site.get("/schedules?pool=slow&page=1").body)
    assert len(slow) == 40
    assert all(int(n[-3:]) % 3 == 0 for n in slow)
    assert listed(site.get("/schedules?task=other.rep").body) == ["other.report"]
    assert listed(site.get("/schedules?condition=ERROR").body) == ["other.report"]
    assert "data-total>0<" in site.get("/schedules?condition=WARNING&q=nothing").body
    fragment = site.get("/schedules?q=proj.scrape_00*", **{"HX-Request": "true"})
    assert fragment.body.lstrip().startswith('<div id="table"')
    assert len(listed(fragment.body)) == 10


def test_no_page_reads_the_whole_fleet(
    web: WebWorld, fleet: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every page reads the store's kept columns a count or a page at a time:
    its read of every schedule (``list_schedules``) is never called."""
    from celery_dgs.store.sql import SqlScheduleStore

    def refused(*_: Any, **__: Any) -> Any:
        raise AssertionError("the status page read every schedule")

    monkeypatch.setattr(SqlScheduleStore, "list_schedules", refused)
    site = web.serve()
    for path in (
        "/",
        "/api/overview",
        "/schedules",
        "/schedules?condition=error",
        "/schedules?q=t.*&pool=slow",
        "/schedules?task=fail&page=2",
        "/schedule?name=t.running",
        "/leases",
    ):
        reply = site.get(path)
        assert reply.status == 200, (path, reply.body[:300])
    assert json.loads(site.get("/api/overview").body)["counts"]["ERROR"] >= 2
    assert "t.failed" in site.get("/leases").body


def test_a_bad_condition_is_refused_and_deep_pages_are_capped(
    web: WebWorld, fleet: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    from celery_dgs.web import views

    site = web.serve()
    bad = site.get("/schedules?condition=LATE")
    assert bad.status == 400
    assert "condition must be ERROR, WARNING or OK, got 'LATE'" in bad.body
    monkeypatch.setattr(views, "MAX_PAGED_ROWS", 2)
    monkeypatch.setattr(views, "PAGE_SIZE", 1)
    capped = web.serve()
    body = capped.get("/schedules?page=9").body
    assert "<b data-total>5</b>" in body
    assert "page 2 of 2" in body  # past the last page: the last one the pages reach
    assert "data-capped" in body
    # A filter is counted no further than one past the pages' reach.
    filtered = capped.get("/schedules?q=t.*&page=9").body
    assert "<b data-total>more than 2</b>" in filtered
    assert "page 2 of 2" in filtered
    assert "data-capped" in filtered
    assert "<b data-total>1</b>" in capped.get("/schedules?q=t.running").body


def test_one_schedule_page(web: WebWorld, fleet: datetime) -> None:
    site = web.serve()
    body = site.get("/schedule?name=t.running").body
    assert "fresh within 1h00m" in body
    assert 'data-reason="ok"' in body
    assert "can start by" in body
    assert "should start by" in body
    assert "error at" in body
    assert 'data-progress="0.4"' in body
    assert 'value="40.0"' in body
    assert "w1@node1" in body
    assert "tag-t.running" in body
    assert body.count('class="run ') == 2  # the success and the live run
    assert 'class="run running"' in body
    assert 'class="run ok"' in body
    assert ">error_at</text>" in body
    assert ">now</text>" in body

    failed = site.get("/schedule?name=t.failed").body
    assert "boom &lt;b&gt;bold&lt;/b&gt;" in failed
    assert "<b>bold</b>" not in failed
    assert 'class="run error"' in failed
    assert 'data-reason="last_run_failed"' in failed
    missing = site.get("/schedule?name=nope")
    assert missing.status == 404

    # The address one guesses leads to the page (urllib follows the redirect).
    guessed = site.get("/schedules/t.failed")
    assert guessed.status == 200
    assert 'data-reason="last_run_failed"' in guessed.body
    assert site.get("/schedules/nope").status == 404


def test_a_silent_owners_run_says_when_the_schedule_runs_again(web: WebWorld) -> None:
    web.dead_owners_run("t.cool")
    body = html.unescape(web.serve().get("/schedule?name=t.cool").body)
    assert '<span class="tag">takeable</span>' in body
    assert "its lease can be taken over at beat's next round" in body
    assert re.search(
        r"the schedule may run again from when it can start, in (8m5\d|9m00)s", body
    ), body


def test_a_silent_owner_alone_in_its_pool_leaves_the_schedule_to_wait(web: WebWorld) -> None:
    """As ``status`` says it: no other live worker consumes its pool."""
    web.register_worker("w2@node2", queues=("reports",))
    web.dead_owners_run("t.cool")
    body = html.unescape(web.serve().get("/schedule?name=t.cool").body)
    assert "but no other live worker consumes its pool 'celery'" in body, body


def test_a_run_whose_worker_restarted_says_it_ended_with_the_earlier_process(
    web: WebWorld,
) -> None:
    web.sync(spec("t.slow"), at=now())
    web.hold_lease("t.slow")
    site = web.serve()
    assert "restarted" not in site.get("/schedule?name=t.slow").body
    web.register_worker("w1@node1")  # the same name, registered after the run's last ping
    deadline = time.monotonic() + 10  # the snapshot's workers are re-read in the background
    while "restarted" not in (body := html.unescape(site.get("/schedule?name=t.slow").body)):
        assert time.monotonic() < deadline, body
        time.sleep(0.1)
    assert "its owner w1@node1 restarted" in body
    assert "the run ended with its earlier process" in body


def test_a_schedules_page_is_shown_against_the_present_when_the_snapshot_is_old(
    web: WebWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The overview's snapshot is kept (here for an hour); a schedule's page
    read after PAGE_FRESH_S reads the live runs and the clock itself."""
    monkeypatch.setattr(pages, "PAGE_FRESH_S", 0.5)
    t0 = now()
    web.sync(spec("t.soon"), at=t0 + timedelta(seconds=1.5))  # may start 1.5 s from now
    site = web.serve(max_age=3600.0)
    first = site.get("/schedule?name=t.soon").body
    assert re.search(r"<th>can start by</th><td>in [\d.]+s", first), first
    while now() < t0 + timedelta(seconds=2.5):  # past its start, the snapshot still t0's
        time.sleep(0.1)
    body = site.get("/schedule?name=t.soon").body
    assert re.search(r"<th>can start by</th><td>[\d.]+s ago", body), body


def test_spec_in_words_with_cron_and_blackout(web: WebWorld) -> None:
    from celery_dgs.core.spec_build import make_spec

    cron = make_spec(
        "cron",
        task="proj.nightly",
        cron_schedule="0 0 * * *",
        tz="America/New_York",
        cron_max_schedule_duration=6 * H,
        blackout_periods=[("12:00", "14:00")],
    )
    web.sync(cron, at=now() - 2 * H)
    body = web.serve().get("/schedule?name=proj.nightly").body
    assert "cron 0 0 * * * America/New_York, done within 6h00m; blackout 12:00-14:00" in body


def test_leases_page_lists_live_runs_and_failures(web: WebWorld, fleet: datetime) -> None:
    body = web.serve().get("/leases").body
    assert "t.running" in body
    assert 'value="40.0"' in body
    assert "t.failed" in body
    assert "boom &lt;b&gt;bold&lt;/b&gt;" in body


def test_names_args_and_errors_are_escaped(web: WebWorld) -> None:
    evil = "<script>alert(1)</script>"
    web.sync(spec(evil, args=("<img src=x onerror=alert(2)>",)), at=now() - 2 * H)
    web.record(evil, "failure", now() - M, error="<svg onload=alert(3)>")
    site = web.serve()
    for path in ("/", "/schedules", f"/schedule?name={evil}", "/leases"):
        body = site.get(path.replace("<", "%3C").replace(">", "%3E")).body
        assert "<script>alert" not in body
        assert "<img src=x" not in body
        assert "<svg onload" not in body
    page = site.get("/schedule?name=%3Cscript%3Ealert(1)%3C/script%3E").body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page


def test_an_unreachable_redis_never_shows_its_password(web: WebWorld, sqlite_url: str) -> None:
    secret = "s3cret-pa55word"
    app = make_web_app(sqlite_url, f"redis://:{secret}@127.0.0.1:{free_port()}/0")
    try:
        site = web.serve(app=app)
        reply = site.get("/")
        assert reply.status == 503
        assert "Cannot read the state" in reply.body
        assert secret not in reply.body
        api = site.get("/api/overview")
        assert secret not in api.body
        assert (api.status, api.headers["content-type"]) == (503, "application/json")
        assert json.loads(api.body) == {
            "error": "Redis could not be read (ConnectionError); the page's log says why"
        }
    finally:
        app.close()


def test_the_leases_page_reads_the_failures_once_per_snapshot(
    web: WebWorld, fleet: datetime
) -> None:
    """Every viewer polls the leases page; its last-run reads of the failing
    schedules are made once per snapshot, not on every request."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    site = web.serve(max_age=600)  # one snapshot for the whole test
    assert "t.failed" in site.get("/leases").body
    statements: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    event.listen(Engine, "before_cursor_execute", count)
    try:
        for _ in range(3):
            assert "t.failed" in site.get("/leases").body
    finally:
        event.remove(Engine, "before_cursor_execute", count)
    assert statements == []


def adaptive_and_prioritised(web: WebWorld) -> datetime:
    """An adaptive schedule with a lister's hint, one disabled after its
    failures, and a priority-80 schedule whose run request is served in class 20."""
    from celery_dgs.core.spec_build import make_spec

    t = now()
    crawl = make_spec("adaptive", task="crawl.site", interval_unit=H)
    broken = make_spec("adaptive", task="crawl.broken", interval_unit=H, max_failures=1)
    web.store.upsert_runtime([crawl, broken], t - 5 * H, last_modified={"crawl.site": t - 30 * M})
    web.record("crawl.site", "success", t - 2 * H)
    web.record("crawl.broken", "failure", t - 10 * M, error="HTTP 500")
    web.sync(spec("etl.low", priority=80), at=t - 2 * H)
    web.record("etl.low", "success", t - 30 * M)
    web.store.request_run("etl.low", t - M, priority=20)
    return t


def test_adaptive_and_priority_state_is_shown(web: WebWorld) -> None:
    adaptive_and_prioritised(web)
    site = web.serve()
    table = site.get("/schedules").body
    assert re.search(
        r"data-ladder>adaptive, every 2h00m now \(step 4 of 0-10, unit 1h00m\)<", table
    )
    assert "data-priority>80→20<" in table
    assert "data-priority>50<" in table
    assert 'data-tag="disabled"' in table

    page = site.get("/schedule?name=crawl.site").body
    assert "data-ladder>adaptive, every 2h00m now (step 4 of 0-10, unit 1h00m)<" in page
    assert "adaptive, unit 1h00m, starting at step 4 of 0-10" in page
    assert re.search(r"data-target>in \d", page)  # its next target: ahead
    assert re.search(r"data-upstream>\d+m\d+s ago", page)  # the lister's hint

    broken = site.get("/schedule?name=crawl.broken").body
    assert 'data-tag="disabled"' in broken
    assert "1 consecutive failures (max_failures 1)" in broken

    low = site.get("/schedule?name=etl.low").body
    assert "data-priority>80→20" in low
    assert "served in class 20 now (run requested)" in low


def test_the_overviews_urgent_list_tags_paused_and_disabled_schedules(web: WebWorld) -> None:
    """A schedule in ERROR that an operator paused, or that its failures
    disabled, says so in "Needs attention" as in the schedules table."""
    t = adaptive_and_prioritised(web)
    web.sync(spec("etl.stuck"), at=t - 5 * H)  # never ran: ERROR
    web.store.set_paused("etl.stuck", True)
    urgent = web.serve().get("/").body.split("Needs attention", 1)[1].split("</section>", 1)[0]
    row_pattern = re.compile(r"<tr>.*?name=([\w.]+).*?</tr>", re.S)
    rows = {m.group(1): m.group(0) for m in row_pattern.finditer(urgent)}
    assert 'data-tag="paused"' in rows["etl.stuck"], urgent
    assert 'data-tag="disabled"' in rows["crawl.broken"], urgent
    assert "data-tag" not in rows.get("etl.low", ""), urgent


def test_the_overview_says_when_beat_not_the_slots_limits(
    web: WebWorld, fleet: datetime, redis_client: redis.Redis
) -> None:
    pace = {"window_s": 60, "rounds": 600, "dispatches": 2400, "capped_rounds": 0}
    redis_client.set(KeySpace(PREFIX).beat_pace(), json.dumps({**pace, "busy_share": 0.85}))
    site = web.serve()
    api = json.loads(site.get("/api/overview").body)
    assert api["beat_pace"]["beat_limited"] is True
    assert api["beat_pace_text"].startswith("beat pace: 40.0 dispatches/s over the last 1m")
    page = html.unescape(site.get("/").body)
    assert "beat, not the slots, limits the runs per second" in page


def test_the_page_has_an_icon(web: WebWorld, fleet: datetime) -> None:
    site = web.serve()
    assert '<link rel="icon" href="/static/favicon.svg"' in site.get("/").body
    icon = site.get("/static/favicon.svg")
    assert icon.status == 200
    assert icon.headers["content-type"].startswith("image/svg+xml")
    assert icon.body.startswith("<svg")
    assert site.get("/favicon.ico").status == 200  # redirected to the SVG


def test_the_overview_says_when_the_restart_grace_holds_schedules(
    web: WebWorld, redis_client: redis.Redis
) -> None:
    """Redis lost the token counter of a schedule that ran (its recorded token
    is above it) and a grant has just seen the server: the page says so."""
    web.sync(spec("etl.ran"), spec("etl.new"), at=now())
    web.record("etl.ran", "success", now() - timedelta(minutes=5))
    web.hold_lease("etl.new")  # the first grant on this server starts the epoch
    site = web.serve()
    api = json.loads(site.get("/api/overview").body)
    assert api["redis_restart_grace"]["seconds_left"] > 0
    page = html.unescape(site.get("/").body)
    assert "Redis restart grace: the server is new since" in page
    assert "ping_timeout + steal_delay" in page


def test_the_overview_says_when_the_leading_beat_serves_another_store(
    web: WebWorld, redis_client: redis.Redis
) -> None:
    web.sync(spec("etl.a"), at=now())
    RedisLeader(redis_client, KeySpace(PREFIX), timeout=30).elect(
        owner_tag="x", owner_node="other-host", owner_pid=9, store="another-store"
    )
    site = web.serve()
    api = json.loads(site.get("/api/overview").body)
    assert api["beat_leader"]["store"] == "another-store"
    assert api["beat_leader_warning"].startswith(
        "the leading beat (other-host/9) serves another schedule store"
    )
    page = html.unescape(site.get("/").body)
    assert "data-leader-warning>the leading beat (other-host/9) serves another" in page


def test_a_workers_own_direct_queue_is_no_pool(web: WebWorld) -> None:
    """Beat sends runs to ``w1@node1.dq2`` (Celery's worker_direct): it is
    not a pool a schedule can name, so neither the filter nor the workers
    table offers it."""
    web.sync(spec("etl.a"), at=now())
    web.register_worker("w1@node1", queues=("celery", "reports", "w1@node1.dq2"))
    site = web.serve()
    schedules = site.get("/schedules").body
    assert "<option >reports" in schedules, schedules
    assert "w1@node1.dq2" not in schedules
    assert "w1@node1.dq2" not in site.get("/").body
