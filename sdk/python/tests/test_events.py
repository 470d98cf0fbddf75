"""ws.events() and ws.follow_events() (GET …/events, ?follow=1 as NDJSON) against a real
berthd: what a call records, the filters as berthd takes them, and a live follower."""

import asyncio
import queue
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

from berth import AsyncWorkspace, Event, InvalidArgumentError, Workspace
from berth._ops_events import event_params, format_since
from conftest import unique


def test_params_join_lists_and_format_times():
    p = dict(event_params(["exec", "desktop_*"], ("key", "system"),
                          datetime(2026, 1, 2, 3, 4, 5, 678, tzinfo=timezone.utc), 7, 50))
    assert p == {"after": "7", "limit": "50", "type": "exec,desktop_*", "actor": "key,system",
                 "since": "2026-01-02T03:04:05Z"}
    plus2 = timezone(timedelta(hours=2))
    assert format_since(datetime(2026, 1, 2, 5, 0, 0, tzinfo=plus2)) == "2026-01-02T03:00:00Z"
    assert format_since(1767322800.9) == "1767322800"
    with pytest.raises(InvalidArgumentError):
        event_params(None, None, None, 0, 0)  # limit 1-1000


def test_events_of_a_command_and_filters(berthd):
    ws = Workspace.create(name=unique("events"))
    try:
        assert ws.commands.run("exit 3", check=False).exit_code == 3
        execs = ws.events(type="exec")
        assert len(execs) == 1
        e = execs[0]
        assert isinstance(e, Event) and e.type == "exec" and e.workspace == ws.id
        assert e.data["exit_code"] == 3 and e.data["cmd"] == "exit 3"
        assert e.actor.startswith("key_") and e.id > 0 and e.at.endswith("Z")
        created = ws.events(type="created")
        assert [x.type for x in created] == ["created"]
        # A list is joined; the key kind matches the key's id.
        both = ws.events(type=["created", "exec"], actor="key")
        assert [x.type for x in both] == ["created", "exec"]
        assert ws.events(type="exec", actor=e.actor)[0].id == e.id
        assert ws.events(type="exec", actor="system") == []
        # since: a time in the future gives nothing, one in the past everything so far.
        assert ws.events(since=datetime.now(timezone.utc) + timedelta(hours=1)) == []
        assert len(ws.events(since=int(time.time()) - 3600, type="exec")) == 1
        # after and limit page through it.
        everything = ws.events()
        assert [x.id for x in everything] == sorted(x.id for x in everything)
        first = ws.events(limit=1)
        assert len(first) == 1 and ws.events(after=first[0].id)[0].id > first[0].id
        with pytest.raises(InvalidArgumentError):
            ws.events(type="a;b")  # berthd's 400
    finally:
        ws.delete()
        ws.close()


def test_follow_sees_a_stop_and_closes(berthd):
    ws = Workspace.create(name=unique("follow"))
    seen: "queue.Queue[Event]" = queue.Queue()
    follower = ws.follow_events(type="stopping,stopped")

    def follow() -> None:
        for ev in follower:
            seen.put(ev)
            if ev.type == "stopped":
                break

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    try:
        time.sleep(0.5)  # the stream is open before the stop
        ws.stop()
        got = [seen.get(timeout=30), seen.get(timeout=30)]
        assert [e.type for e in got] == ["stopping", "stopped"]
        assert got[1].data.get("state") == "stopped"
        t.join(10)
        assert not t.is_alive()
        follower.close()  # already ended by the break: a no-op
        # A follower that is closed while it waits for more ends cleanly.
        live = ws.follow_events(type="stopped")
        assert next(live).type == "stopped"  # the backlog
        live.close()
        with pytest.raises(StopIteration):
            next(live)
    finally:
        ws.delete()
        ws.close()


def test_async_events_and_follow(berthd):
    async def main() -> None:
        ws = await AsyncWorkspace.create(name=unique("aevents"))
        try:
            await ws.commands.run("exit 4", check=False)
            execs = await ws.events(type="exec")
            assert [e.data["exit_code"] for e in execs] == [4]
            follower = ws.follow_events(type="exec")
            got = await asyncio.wait_for(follower.__anext__(), 30)
            assert got.id == execs[0].id
            await ws.commands.run("exit 5", check=False)
            got = await asyncio.wait_for(follower.__anext__(), 30)
            assert got.data["exit_code"] == 5
            await follower.aclose()
            with pytest.raises(InvalidArgumentError):
                await ws.events(type="a;b")
        finally:
            await ws.delete()
            await ws.close()

    asyncio.run(main())
