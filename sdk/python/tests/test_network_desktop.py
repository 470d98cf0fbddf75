"""ws.network (GET|PATCH …/network) and ws.desktop's control and tickets (…/desktop/control,
…/takeover, …/release, …/tickets), against berthd as it answers on the unix transport."""

import time
from datetime import datetime

import pytest

from berth import InvalidArgumentError, Workspace
from conftest import unique


@pytest.fixture(scope="module")
def ws(berthd):
    w = Workspace.create(name=unique("netdesk"))
    yield w
    w.delete()
    w.close()


def test_network_get_and_set(ws):
    st = ws.network.get()
    assert st.egress == "open" and st.allow == []
    assert isinstance(st.counters, dict) and isinstance(st.refused, list)
    st = ws.network.set(allow=["github.com", "*.pypi.org", "203.0.113.0/24"])
    assert st.egress == "allowlist"
    assert st.allow == ["github.com", "*.pypi.org", "203.0.113.0/24"]
    assert ws.network.get().allow == st.allow  # kept
    assert ws.network.set(egress="none").egress == "none"
    assert ws.network.set(egress="open").egress == "open"
    with pytest.raises(InvalidArgumentError):
        ws.network.set(egress="open", allow=["github.com"])  # berthd's 400
    with pytest.raises(InvalidArgumentError):
        ws.network.set(egress="sometimes")  # the SDK's own check
    assert ws.network.get().egress == "open"


def test_desktop_control_take_over_and_release(ws):
    c = ws.desktop.control()
    assert c.holder == "agent"
    c = ws.desktop.take_over(private=True, reason="log in to the bank")
    assert c.holder == "human" and c.private and c.reason == "log in to the bank"
    assert c.lease_expires
    assert ws.desktop.control().holder == "human"
    c = ws.desktop.release(note="logged in")
    assert c.holder == "agent"
    # A lease of the person's own: berthd's lease_expires is that far off.
    c = ws.desktop.take_over(lease=60)
    since = datetime.fromisoformat(c.since.replace("Z", "+00:00"))
    expires = datetime.fromisoformat(c.lease_expires.replace("Z", "+00:00"))
    assert 59 <= (expires - since).total_seconds() <= 61
    ws.desktop.release()
    # Nobody holds it: wait_release answers at once.
    assert ws.desktop.wait_release(timeout=5).holder == "agent"


def test_desktop_tickets(ws):
    t = ws.desktop.ticket("view")
    assert t.ticket.startswith("dt_") and t.mode == "view" and t.expires_at
    assert t.url.startswith("ws://") and t.ticket in t.url
    assert ws.desktop.ticket("control").mode == "control"
    with pytest.raises(InvalidArgumentError):
        ws.desktop.ticket("drive")


def test_desktop_request_human_nobody_answers(ws):
    start = time.monotonic()
    c = ws.desktop.request_human("solve the captcha", timeout=1)
    assert time.monotonic() - start < 10
    assert c.answered is False and c.url
    assert c.holder == "agent" and c.request is None  # withdrawn at the timeout
    # Without a timeout it answers at once with the open request; withdraw_request ends it.
    c = ws.desktop.request_human("log in", timeout=None)
    assert c.request is not None and c.request.get("reason") == "log in"
    assert ws.desktop.control().request is not None
    c = ws.desktop.withdraw_request()
    assert c.request is None and ws.desktop.control().request is None
    with pytest.raises(InvalidArgumentError):
        ws.desktop.request_human("too long", timeout=7200)
