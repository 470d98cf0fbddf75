"""Workspace's lifecycle, configuration, listing and error mapping against a real berthd."""


import pytest

import berth
from berth import (AlreadyExistsError, AuthError, ConflictError, InvalidArgumentError,
                   NotFoundError, Workspace)
from conftest import unique


def test_create_waits_and_carries_settings(berthd):
    name = unique("life")
    ws = Workspace.create(name=name, image="base", size="small", idle_timeout=600,
                          idle_action="hibernate", env={"GREETING": "hi"},
                          labels={"suite": "sdk", "case": name})
    assert ws.state == "running"  # waited with POST …/wait
    info = ws.info()
    assert (info.name, info.image, info.size) == (name, "base", "small")
    assert (info.idle_timeout, info.idle_action) == (600, "hibernate")
    assert info.env == {"GREETING": "hi"} and info.labels["suite"] == "sdk"
    # The workspace env reaches commands.
    assert ws.commands.run("echo $GREETING").stdout == "hi\n"
    info = ws.set_idle(timeout=900, action="stop")
    assert (info.idle_timeout, info.idle_action) == (900, "stop")
    assert ws.info().idle_timeout == 900
    ws.delete(wait=True)
    with pytest.raises(NotFoundError):
        Workspace.connect(name)
    ws.close()


def test_create_without_wait_then_connect_and_a_generated_name(berthd):
    ws = Workspace.create(wait=False)
    assert ws.name.startswith("ws-") and ws.state in ("creating", "starting", "running")
    again = Workspace.connect(ws.id)
    assert again.id == ws.id and again.state == "running"


def test_stop_start_hibernate_and_connect_wakes(berthd):
    ws = Workspace.create(name=unique("wake"))
    assert ws.stop().state == "stopped"
    assert ws.info().state == "stopped"
    woken = Workspace.connect(ws.name)  # starts it and waits
    assert woken.state == "running"
    assert ws.stop(force=True).state == "stopped"
    # A call to a sleeping workspace wakes it (berthd holds the request meanwhile).
    assert ws.commands.run("echo awake").stdout == "awake\n"
    assert ws.info().state == "running"
    ws.stop()
    assert ws.start().state == "running"
    assert ws.start().state == "running"  # asking for the state it is in is no error
    assert ws.hibernate().state == "hibernated"
    assert ws.info().state == "hibernated"
    assert Workspace.connect(ws.name).state == "running"  # resumed


def test_get_or_create_makes_once(berthd):
    name = unique("goc")
    first = Workspace.get_or_create(name, labels={"k": "v"})
    second = Workspace.get_or_create(name, labels={"k": "other"})
    assert first.id == second.id and second.state == "running"
    assert second.info().labels == {"k": "v"}  # the existing one, untouched
    first.stop()
    assert Workspace.get_or_create(name).state == "running"  # and woken


def test_list_walks_every_page_and_filters(berthd):
    tag = unique("page")
    made = {Workspace.create(name=unique("ls"), labels={"batch": tag}, wait=False).id
            for _ in range(5)}
    seen = [w.id for w in Workspace.list(label=f"batch={tag}", page_size=2)]
    assert sorted(seen) == sorted(made) and len(seen) == 5  # three pages, no repeats
    assert {w.id for w in Workspace.list(label={"batch": tag})} == made
    assert [w for w in Workspace.list(label={"batch": "none-" + tag})] == []
    ws = Workspace.create(name=unique("ls"), labels={"solo": tag})
    assert ws.id in {w.id for w in Workspace.list(state="running")}
    ws.stop()
    assert ws.id not in {w.id for w in Workspace.list(state="running")}
    assert [w.id for w in Workspace.list(state="stopped", label=f"solo={tag}")] == [ws.id]


def test_configuration_from_arguments_and_environment(berthd, monkeypatch):
    name = unique("cfg")
    monkeypatch.delenv("BERTH_URL")
    monkeypatch.delenv("BERTH_API_KEY")
    with pytest.raises(AuthError):
        Workspace.create(name=name)
    ws = Workspace.create(name=name, url=berthd.url, api_key=berthd.key)
    assert ws.state == "running"
    monkeypatch.setenv("BERTH_URL", berthd.url)
    monkeypatch.setenv("BERTH_API_KEY", berthd.key)
    assert Workspace.connect(name).id == ws.id


def test_errors_map_to_types(berthd):
    with pytest.raises(NotFoundError) as nf:
        Workspace.connect("no-such-workspace")
    assert (nf.value.status, nf.value.code, nf.value.retryable) == (404, "not_found", False)
    assert isinstance(nf.value, berth.BerthError)

    with pytest.raises(AuthError) as auth:
        Workspace.create(name=unique("auth"), api_key="bk_wrong")
    assert (auth.value.status, auth.value.code) == (401, "unauthenticated")

    name = unique("dup")
    Workspace.create(name=name, wait=False)
    with pytest.raises(AlreadyExistsError) as dup:
        Workspace.create(name=name)
    assert isinstance(dup.value, ConflictError)
    assert (dup.value.status, dup.value.code) == (409, "already_exists")

    with pytest.raises(InvalidArgumentError) as bad:
        Workspace.create(name=unique("bad"), idle_action="explode")
    assert (bad.value.status, bad.value.code) == (400, "invalid_argument")

    ws = Workspace.create(name=unique("state"))
    ws.stop()
    with pytest.raises(ConflictError) as state:
        ws.hibernate()  # a stopped workspace cannot hibernate
    assert (state.value.status, state.value.code) == (409, "failed_precondition")


def test_transport_errors_are_wrapped(berthd):
    import socket
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(berth.UnavailableError) as e:
        Workspace.connect("x", url=f"http://127.0.0.1:{port}", request_timeout=5)
    assert e.value.status is None and e.value.retryable and e.value.code == "unavailable"
    assert e.value.__cause__ is None  # the httpx exception is not chained in as the cause


def test_create_with_a_screen(berthd):
    ws = Workspace.create(name=unique("screen"), screen="1024x768")
    try:
        assert ws.info().screen == "1024x768"
    finally:
        ws.delete()
        ws.close()
    with pytest.raises(InvalidArgumentError):
        Workspace.create(name=unique("screen"), screen="1004x768")  # 1004 is not a multiple of 8
    with pytest.raises(InvalidArgumentError):
        Workspace.create(name=unique("screen"), screen="640x400")  # under 480 high
