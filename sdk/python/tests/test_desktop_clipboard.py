"""ws.desktop.clipboard() and set_clipboard() (GET/PUT …/desktop/clipboard) against the real
berthd of conftest.py, whose desktop.clipboard_tool is a stand-in for the desktop image's tool
(its text in a file beside it): any Unicode there and back, the timeline's record without the
text, who may set it while a person holds control (LockedError for anyone else), a private
takeover hiding it, the display not up (UnavailableError), an image without the tool
(ConflictError), and the SDK's own checks, which refuse what berthd would without calling it."""

import asyncio
import json
import os
import time
from typing import Iterator, List

import httpx
import pytest

from berth import (AsyncWorkspace, ConflictError, Event, InvalidArgumentError, LockedError,
                   UnavailableError, Workspace)
from berth._core import resolve_config
from berth._ops_desktop import MAX_CLIPBOARD
from berth._sync import Connection
from berth.types import WorkspaceInfo
from conftest import free_port, unique

TEXT = "p\u00e4ssw\u00f6rd-free: \u4e16\u754c \u2713 \U0001F600\n\ttabs and \"quotes\""


@pytest.fixture(scope="module")
def ws(berthd) -> Iterator[Workspace]:
    w = Workspace.create(name=unique("clip"))
    try:
        yield w
    finally:
        w.delete()
        w.close()


def clipboard_events(ws: Workspace, count: int) -> List[Event]:
    """The desktop_clipboard_set events, once there are `count` (berthd writes the timeline
    just after it answers)."""
    deadline = time.monotonic() + 10
    while True:
        sets = ws.events(type="desktop_clipboard_set", limit=1000)
        if len(sets) >= count or time.monotonic() > deadline:
            return sets
        time.sleep(0.05)


def stored(berthd) -> str:
    with open(os.path.join(berthd.clipboard, "text"), encoding="utf-8") as f:
        return f.read()


def test_any_unicode_there_and_back_and_the_timeline_keeps_no_text(berthd, ws: Workspace) -> None:
    assert ws.desktop.set_clipboard(TEXT) == len(TEXT.encode())
    assert stored(berthd) == TEXT  # the tool got exactly these bytes on its stdin
    assert ws.desktop.clipboard() == TEXT
    assert ws.desktop.set_clipboard("") == 0
    assert ws.desktop.clipboard() == ""
    # Near the 1 MiB limit, in characters of 2, 3 and 4 bytes: sent as UTF-8, not escaped (as
    # \u escapes this would be a body of 3 MiB). Not up to 1 MiB exactly: berthd hands the
    # text to the agent inside a JSON request of its own, whose limit (1 MiB) counts the rest
    # of that request too.
    big = "\u00e9\u4e16\U0001F600" * ((MAX_CLIPBOARD - 1024) // 9)
    assert ws.desktop.set_clipboard(big) == len(big.encode()) > MAX_CLIPBOARD - 1024 - 9
    assert ws.desktop.clipboard() == big
    ws.desktop.set_clipboard(TEXT)
    sets = clipboard_events(ws, 4)
    assert [e.data.get("bytes") for e in sets] == [len(TEXT.encode()), 0, len(big.encode()),
                                                  len(TEXT.encode())]
    assert all(e.data.get("holder") == "agent" and e.actor.startswith("key_") for e in sets)
    kept = json.dumps([e.raw for e in sets], ensure_ascii=False)
    assert "rd-free" not in kept and "\u4e16" not in kept


def test_a_person_holds_control_only_they_set_it(berthd, ws: Workspace) -> None:
    ws.desktop.set_clipboard("before")
    made = httpx.post(f"{berthd.url}/v1/keys", json={"scope": "write", "name": unique("person")},
                      headers={"Authorization": f"Bearer {berthd.key}"}).json()
    with Workspace.connect(ws.id, api_key=made["key"]) as person:
        taken = person.desktop.take_over(reason="paste a password")
        try:
            with pytest.raises(LockedError) as locked:
                ws.desktop.set_clipboard("the agent's")
            e = locked.value
            assert e.status == 423 and e.code == "locked" and e.retryable is False
            assert e.holder == "human" and e.by == made["id"] == taken.by
            assert e.reason == "paste a password"
            assert ws.desktop.clipboard() == "before"  # reading stays allowed
            # The person holding control sets it with their own key.
            theirs = "the person's \u2713"
            assert person.desktop.set_clipboard(theirs) == len(theirs.encode())
            assert ws.desktop.clipboard() == theirs
            last = clipboard_events(ws, 6)[-1]
            assert last.data.get("holder") == "human" and last.actor == made["id"]
            # A private takeover: the person may have copied a password; the agent cannot read it.
            person.desktop.release()
            person.desktop.take_over(private=True)
            with pytest.raises(LockedError) as hidden:
                ws.desktop.clipboard()
            assert hidden.value.private is True and hidden.value.holder == "human"
            # docs/api.md: the person holding the private takeover still reads it.
            assert person.desktop.clipboard() == theirs
        finally:
            assert person.desktop.release().holder == "agent"
    assert ws.desktop.set_clipboard("after") == 5


def test_no_display_and_no_tool(berthd, ws: Workspace) -> None:
    down = os.path.join(berthd.clipboard, "down")
    open(down, "w").close()
    try:
        with pytest.raises(UnavailableError) as e:
            ws.desktop.clipboard()
        assert e.value.status == 503 and "not up" in e.value.message
    finally:
        os.remove(down)
    # An image without the desktop's tool (the agent cannot run it: 127).
    tool = os.path.join(berthd.clipboard, "clipboard")
    os.rename(tool, tool + ".away")
    try:
        with pytest.raises(ConflictError) as missing:
            ws.desktop.set_clipboard("x")
        assert missing.value.status == 409 and missing.value.code == "failed_precondition"
    finally:
        os.rename(tool + ".away", tool)
    assert ws.desktop.set_clipboard("back") == 4


def test_async_clipboard(ws: Workspace) -> None:
    async def main() -> None:
        async with await AsyncWorkspace.connect(ws.id) as aws:
            assert await aws.desktop.set_clipboard(TEXT) == len(TEXT.encode())
            assert await aws.desktop.clipboard() == TEXT
            with pytest.raises(InvalidArgumentError):
                await aws.desktop.set_clipboard(b"bytes")  # type: ignore[arg-type]

    asyncio.run(main())


def test_refused_locally(berthd) -> None:
    # A handle on an address where nothing listens: a call would be an UnavailableError, so an
    # InvalidArgumentError proves the SDK refused it itself.
    dead = f"http://127.0.0.1:{free_port()}"
    conn = Connection(resolve_config(dead, "bk_none", 5.0))
    info = WorkspaceInfo(id="ws_nowhere", name="nowhere", state="running")
    with Workspace(info, conn) as nowhere:
        with pytest.raises(UnavailableError):
            nowhere.desktop.set_clipboard("sent")  # the control: this one is sent
        for bad, code in ((5, "invalid_argument"), (None, "invalid_argument"),
                          (b"bytes", "invalid_argument"), ("lone \ud800", "invalid_argument"),
                          ("x" * (MAX_CLIPBOARD + 1), "too_large"),
                          ("\u00e9" * (MAX_CLIPBOARD // 2 + 1), "too_large")):
            with pytest.raises(InvalidArgumentError) as e:
                nowhere.desktop.set_clipboard(bad)  # type: ignore[arg-type]
            assert e.value.status is None and e.value.code == code, (bad if len(str(bad)) < 20
                                                                     else len(str(bad)))
        # Typing what the keyboard map lacks says how to send it instead.
        with pytest.raises(InvalidArgumentError) as typed:
            nowhere.desktop.type("h\u00e9llo")
        assert "set_clipboard" in typed.value.message and "ctrl+v" in typed.value.message
