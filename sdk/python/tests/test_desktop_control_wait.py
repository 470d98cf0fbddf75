"""ws.desktop's control revision and wait_for_control_change (GET …/desktop/control?wait=change
&revision=N) against the real berthd of conftest.py (in-process agents): a takeover by another
key wakes a waiter at once with the new revision, a renewal of the lease does not, the wait is
asked again across berthd's own timeouts until the caller's, request_timeout bounds the whole
call, a workspace that stops ends it with ConflictError, and AsyncWorkspace does the same."""

import asyncio
import threading
import time
from typing import Any, Dict, Iterator

import httpx
import pytest

from berth import (AsyncWorkspace, ConflictError, InvalidArgumentError, TimeoutError,
                   Workspace)
from berth import _ops_desktop
from conftest import unique


@pytest.fixture(scope="module")
def ws(berthd) -> Iterator[Workspace]:
    w = Workspace.create(name=unique("ctlwait"))
    yield w
    w.delete()
    w.close()


@pytest.fixture(scope="module")
def person(berthd, ws: Workspace) -> Iterator[Workspace]:
    """The same workspace through another key (a person's)."""
    made = httpx.post(f"{berthd.url}/v1/keys", json={"scope": "write", "name": unique("person")},
                      headers={"Authorization": f"Bearer {berthd.key}"}).json()
    with Workspace.connect(ws.id, api_key=made["key"]) as p:
        p.key_id = made["id"]  # type: ignore[attr-defined]
        yield p


@pytest.fixture
def agent_holds(ws: Workspace, person: Workspace) -> Iterator[None]:
    if ws.desktop.control().holder != "agent":
        person.desktop.release()
    yield
    if ws.desktop.control().holder != "agent":
        person.desktop.release()


def in_thread(fn: Any) -> Dict[str, Any]:
    """Runs fn on a thread: box["result"] or box["error"], box["at"] (monotonic) when done."""
    box: Dict[str, Any] = {}

    def go() -> None:
        try:
            box["result"] = fn()
        except BaseException as e:  # noqa: BLE001 - the test looks at it
            box["error"] = e
        box["at"] = time.monotonic()
    t = threading.Thread(target=go, daemon=True)
    box["thread"] = t
    t.start()
    return box


def test_revision_changes_with_takeover_and_release_not_renewal(ws, person, agent_holds):
    r0 = ws.desktop.control().revision
    assert isinstance(r0, int) and r0 >= 0
    taken = person.desktop.take_over(reason="a person")
    assert taken.holder == "human" and taken.revision > r0
    renewed = person.desktop.take_over(reason="a person")  # the same key: a renewal
    assert renewed.revision == taken.revision
    back = person.desktop.release(note="done")
    assert back.holder == "agent" and back.revision > taken.revision
    assert ws.desktop.control().revision == back.revision


def test_a_takeover_by_another_key_wakes_the_waiter(ws, person, agent_holds):
    r0 = ws.desktop.control().revision
    box = in_thread(lambda: ws.desktop.wait_for_control_change(r0, timeout=60))
    time.sleep(1.0)
    assert "at" not in box, f"the wait ended before any change: {box}"
    t0 = time.monotonic()
    taken = person.desktop.take_over(reason="wake the waiter")
    box["thread"].join(10)
    assert "result" in box, box
    got = box["result"]
    assert got.revision == taken.revision != r0
    assert got.holder == "human" and got.by == person.key_id and got.reason == "wake the waiter"
    assert box["at"] - t0 < 2.0, f"woke {box['at'] - t0:.2f} s after the takeover"
    # revision=None waits for the next change from the current state: the hand-back.
    box = in_thread(lambda: ws.desktop.wait_for_control_change(timeout=60))
    time.sleep(0.5)
    back = person.desktop.release()
    box["thread"].join(10)
    assert box["result"].holder == "agent" and box["result"].revision == back.revision


def test_a_renewal_does_not_wake_the_waiter(ws, person, agent_holds):
    taken = person.desktop.take_over()
    box = in_thread(lambda: ws.desktop.wait_for_control_change(taken.revision, timeout=3))
    time.sleep(0.5)
    t0 = time.monotonic()
    assert person.desktop.take_over().revision == taken.revision  # renewed
    box["thread"].join(15)
    got = box["result"]
    # It answered at the caller's timeout, with the state unchanged.
    assert got.revision == taken.revision and got.holder == "human"
    assert box["at"] - t0 >= 1.5


def test_the_wait_is_asked_again_across_berthds_timeouts(ws, person, agent_holds, monkeypatch):
    monkeypatch.setattr(_ops_desktop, "CONTROL_WAIT_STEP", 1)  # berthd holds each wait 1 s
    r0 = ws.desktop.control().revision
    t0 = time.monotonic()
    box = in_thread(lambda: ws.desktop.wait_for_control_change(r0, timeout=30))
    time.sleep(3.5)  # several of berthd's waits ran out meanwhile
    assert "at" not in box, box
    taken = person.desktop.take_over()
    box["thread"].join(10)
    assert box["result"].revision == taken.revision and box["at"] - t0 > 3.0
    # No change at all: the state at the caller's timeout, after a few of berthd's.
    t0 = time.monotonic()
    got = ws.desktop.wait_for_control_change(taken.revision, timeout=2.5)
    assert got.revision == taken.revision and 1.5 <= time.monotonic() - t0 < 5


def test_request_timeout_bounds_the_whole_wait(ws, agent_holds):
    r0 = ws.desktop.control().revision
    t0 = time.monotonic()
    with pytest.raises(TimeoutError) as e:
        ws.desktop.wait_for_control_change(r0, timeout=60, request_timeout=3)
    assert time.monotonic() - t0 < 5 and e.value.code == "deadline_exceeded"


def test_bad_arguments_are_refused_before_any_call(ws):
    with pytest.raises(InvalidArgumentError):
        ws.desktop.wait_for_control_change(-1)
    with pytest.raises(InvalidArgumentError):
        ws.desktop.wait_for_control_change("3")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        ws.desktop.wait_for_control_change(timeout=-5)


def test_a_workspace_that_stops_ends_the_wait(berthd, monkeypatch):
    monkeypatch.setattr(_ops_desktop, "CONTROL_WAIT_STEP", 1)
    w = Workspace.create(name=unique("ctlstop"))
    try:
        r0 = w.desktop.control().revision
        box = in_thread(lambda: w.desktop.wait_for_control_change(r0, timeout=120))
        time.sleep(1.0)
        t0 = time.monotonic()
        w.stop()
        box["thread"].join(30)
        assert isinstance(box.get("error"), ConflictError), box
        assert box["error"].code == "failed_precondition" and "is stopp" in str(box["error"])
        assert box["at"] - t0 < 10
    finally:
        w.delete()
        w.close()


def test_async_waits_and_wakes(berthd, ws, person, agent_holds):
    async def main() -> None:
        async with await AsyncWorkspace.connect(ws.id) as aws:
            r0 = (await aws.desktop.control()).revision
            waiter = asyncio.ensure_future(aws.desktop.wait_for_control_change(r0, timeout=60))
            await asyncio.sleep(0.5)
            assert not waiter.done()
            taken = await asyncio.to_thread(person.desktop.take_over)
            got = await asyncio.wait_for(waiter, 10)
            assert got.revision == taken.revision and got.holder == "human"
            same = await aws.desktop.wait_for_control_change(got.revision, timeout=1.5)
            assert same.revision == got.revision
    asyncio.run(main())
