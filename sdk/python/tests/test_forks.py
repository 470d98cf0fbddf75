"""Forks and templates: ws.checkpoints.fork (POST …/checkpoints/{cp}/fork), ws.fork and
Workspace.create(from_workspace=, from_checkpoint=) (POST /v1/workspaces {from}),
Workspace.create(template=) and Templates (/v1/templates), sync and async, against berthd on
the unix transport (tests/conftest.py), where a fork's "guest" is a host agent of its own that
takes the fork's identity into its own files.

libvirt's test driver takes no checkpoint of a running workspace (see test_checkpoints.py), so
forks here are made of STOPPED workspaces' checkpoints, and no checkpoint with memory exists:
berthd's refusal of a template of one without memory ("has no memory") is what reaches it, and
a stand-in server (test_deadlines.Stub) shows what the SDK sends for a template and makes of
berthd's answers. That a fork resumes its source's memory, and that a template's workspace
runs its programs, is tests/e2e's to show on a real VM.

Templates built from a script: berthd makes the build's workspace (a host agent here) and runs
the script through its agent, so a script that fails, its log and berthd's refusals are real;
a build that gets through ends at the checkpoint of the workspace's memory, which the test
driver cannot take, so the SDK's wait for a "ready" build is shown against the stand-in."""

import asyncio
import json
import time

import httpx
import pytest

from berth import (AlreadyExistsError, AsyncTemplates, AsyncWorkspace, ConflictError,
                   InvalidArgumentError, NotFoundError, Template, TemplateBuildError, Templates,
                   TimeoutError, UnavailableError, Workspace)
from conftest import unique
from test_deadlines import WS, WAKING, Stub


def _gone(*workspaces):
    """Deletes forks first (their source cannot go while they exist), then the rest."""
    for w in workspaces:
        try:
            w.delete(wait=True, request_timeout=60)
        except NotFoundError:
            pass
        w.close()


@pytest.fixture
def src(berthd):
    """A stopped workspace with a checkpoint named "base" of its disks."""
    w = Workspace.create(name=unique("src"))
    w.stop()
    w.checkpoints.create(name="base")
    made = []
    yield w, made
    _gone(*made)
    _gone(w)


def test_checkpoints_fork_makes_count_running_forks_named_name_dash_i_on_the_checkpoint(src):
    ws, made = src
    base = ws.checkpoints.get("base")
    name = unique("twig")
    forks = ws.checkpoints.fork("base", name=name, count=2, labels={"role": "fork"})
    made += forks
    assert [f.name for f in forks] == [f"{name}-1", f"{name}-2"]
    assert all(isinstance(f, Workspace) for f in forks)
    assert len({f.id for f in forks} | {ws.id}) == 3  # new workspaces, not the source
    # wait=True (the default): each handle is returned running, and berthd agrees.
    assert [f.state for f in forks] == ["running", "running"]
    for f in forks:
        info = f.info()
        assert (info.state, info.forked_from, info.labels) == ("running", base.id, {"role": "fork"})
        assert info.image == ws.info().image
        assert f.commands.run("echo ok").stdout == "ok\n"  # its own agent answers


def test_a_fork_keeps_its_checkpoint_and_its_source_from_being_deleted_until_it_is_gone(src):
    ws, made = src
    fork = ws.checkpoints.fork("base", name=unique("leaf"))[0]
    made.append(fork)
    with pytest.raises(ConflictError) as e:
        ws.checkpoints.delete("base")
    assert e.value.status == 409 and fork.name in e.value.message  # berthd names the forks
    with pytest.raises(ConflictError):
        ws.delete()
    fork.delete(wait=True)
    assert ws.checkpoints.delete("base").name == "base"


def test_checkpoints_fork_errors_are_typed_and_make_nothing(src):
    ws, made = src
    before = {w.id for w in Workspace.list()}
    with pytest.raises(NotFoundError) as e:
        ws.checkpoints.fork("no-such-checkpoint", name=unique("x"))
    assert e.value.status == 404 and e.value.code == "not_found"
    with pytest.raises(InvalidArgumentError) as e:
        ws.checkpoints.fork("base", name=unique("many"), count=17)  # 1-16
    assert "'count'" in e.value.message
    taken = unique("taken")
    made.append(Workspace.create(name=taken, wait=False))
    with pytest.raises(AlreadyExistsError) as e:
        ws.checkpoints.fork("base", name=taken)
    assert e.value.status == 409 and e.value.code == "already_exists"
    assert {w.id for w in Workspace.list()} == before | {made[0].id}


def test_ws_fork_without_a_checkpoint_forks_one_taken_of_it_now(src):
    ws, made = src
    fork = ws.fork(name=unique("now"), labels={"k": "v"})
    made.append(fork)
    assert fork.state == "running" and fork.id != ws.id
    info = fork.info()
    assert info.labels == {"k": "v"}
    # berthd took a new checkpoint of the stopped source (not "base") and forked that.
    taken = {c.id: c for c in ws.checkpoints.list()}
    assert info.forked_from in taken and taken[info.forked_from].name != "base"
    assert taken[info.forked_from].taken_while == "stopped"


def test_ws_fork_and_create_from_workspace_fork_the_named_checkpoint(src):
    ws, made = src
    base = ws.checkpoints.get("base")
    a = ws.fork(name=unique("a"), checkpoint="base")
    made.append(a)
    b = Workspace.create(name=unique("b"), from_workspace=ws.name, from_checkpoint=base.id,
                         wait=False)
    made.append(b)
    assert b.state == "creating"  # wait=False: as berthd answered
    assert a.info().forked_from == base.id == b.info().forked_from
    assert len(ws.checkpoints.list()) == 1  # nothing taken: both named their checkpoint


def test_create_from_with_a_field_a_fork_cannot_have_is_invalid_argument(src):
    ws, _ = src
    with pytest.raises(InvalidArgumentError) as e:
        Workspace.create(name=unique("wide"), size="large", from_workspace=ws.id)
    assert e.value.status == 400 and "'size' cannot be given with 'from'" in e.value.message
    # A checkpoint without its workspace cannot be said on the wire: refused before sending.
    with pytest.raises(InvalidArgumentError) as e:
        Workspace.create(name=unique("half"), from_checkpoint="base")
    assert e.value.status is None and "from_workspace" in e.value.message
    with pytest.raises(NotFoundError):
        Workspace.create(name=unique("orphan"), from_workspace="no-such-workspace")


def test_templates_against_berthd_none_listed_unknown_is_not_found_no_memory_is_conflict(src):
    ws, _ = src
    assert Templates.list() == []
    for call in (lambda: Templates.get("nope"), lambda: Templates.delete("nope")):
        with pytest.raises(NotFoundError) as e:
            call()
        assert e.value.status == 404
    with pytest.raises(NotFoundError) as e:
        Workspace.create(name=unique("t"), template="nope")
    assert "no template 'nope'" in e.value.message
    # "base" is a checkpoint of the disks only: a template needs one with memory.
    with pytest.raises(ConflictError) as e:
        Templates.create(unique("cold"), ws, checkpoint="base")
    assert (e.value.status, e.value.code) == (409, "failed_precondition")
    assert "has no memory" in e.value.message
    # Without a checkpoint berthd takes one with memory now: the stopped source has none.
    with pytest.raises(ConflictError):
        Templates.create(unique("cold"), ws.name)
    assert Templates.list() == []


TPL = {"id": "tpl_0123456789abcdef", "name": "py-db", "workspace_id": WS["id"],
       "checkpoint_id": "cp_0123456789abcdef", "workspace": "stub", "image": "base", "cpus": 2,
       "memory_mib": 2048, "disk_gib": 10, "created_by": "key_x",
       "created_at": "2026-12-04T00:00:00Z"}


def _sent(stub):
    """(method, path, JSON body or None) of each request the stand-in saw."""
    return [(s[0], s[1], json.loads(b) if b else None) for s, b in zip(stub.seen, stub.bodies)]


def test_templates_send_berthds_fields_and_read_its_answers_from_a_stand_in():
    gone = {k: v for k, v in TPL.items()
            if k not in ("workspace", "image", "cpus", "memory_mib", "disk_gib")}
    stub = Stub([(201, {}, TPL, 0), (201, {}, TPL, 0), (200, {}, {"templates": [TPL, gone]}, 0),
                 (200, {}, TPL, 0), (200, {}, TPL, 0)])
    try:
        conn = {"url": stub.url, "api_key": "k"}
        t = Templates.create("py-db", "stub", checkpoint="warm", **conn)
        assert isinstance(t, Template)
        assert (t.id, t.name, t.workspace_id, t.checkpoint_id) == (
            TPL["id"], "py-db", WS["id"], "cp_0123456789abcdef")
        assert (t.workspace, t.image, t.cpus, t.memory_mib, t.disk_gib) == (
            "stub", "base", 2, 2048, 10)
        assert (t.created_by, t.created_at, t.raw) == ("key_x", "2026-12-04T00:00:00Z", TPL)
        Templates.create("py-db", "stub", **conn)
        listed = Templates.list(**conn)
        # Once its workspace is gone berthd leaves out what a workspace from it would be.
        assert [x.name for x in listed] == ["py-db", "py-db"]
        assert (listed[1].workspace, listed[1].cpus) == (None, None)
        assert Templates.get("py db", **conn).id == TPL["id"]
        assert Templates.delete("py-db", **conn).id == TPL["id"]
        assert _sent(stub) == [
            ("POST", "/v1/templates", {"name": "py-db", "from": {"workspace": "stub",
                                                                 "checkpoint": "warm"}}),
            ("POST", "/v1/templates", {"name": "py-db", "from": {"workspace": "stub"}}),
            ("GET", "/v1/templates", None),
            ("GET", "/v1/templates/py%20db", None),  # a name is one path segment
            ("DELETE", "/v1/templates/py-db", None)]
    finally:
        stub.close()


def test_create_from_a_template_or_a_fork_sends_only_name_labels_and_its_source_once():
    creating = dict(WS, state="creating")
    stub = Stub([(201, {}, creating, 0), (200, {}, WS, 0),  # the create, then POST …/wait
                 (201, {}, WS, 0), (201, {}, WS, 0), WAKING])
    try:
        conn = {"url": stub.url, "api_key": "k"}
        ws = Workspace.create(name="from-tpl", template="py-db", labels={"a": "b"}, **conn)
        assert ws.state == "running"  # waited for, as any create
        ws.fork(name="now").close()
        Workspace.create(name="of-cp", from_workspace="src", from_checkpoint="base", **conn)
        # berthd takes no Idempotency-Key for a fork: none is sent, and a 503 with
        # Retry-After reaches the caller instead of a second POST.
        with pytest.raises(UnavailableError):
            Workspace.create(name="again", template="py-db", **conn)
        posts = [(p, b) for m, p, b in _sent(stub) if m == "POST"]
        assert posts[1][0] == f"/v1/workspaces/{WS['id']}/wait"
        assert posts[1][1]["state"] == "running"
        del posts[1]
        assert posts == [
            ("/v1/workspaces", {"name": "from-tpl", "template": "py-db", "labels": {"a": "b"}}),
            ("/v1/workspaces", {"name": "now", "from": {"workspace": WS["id"]}}),
            ("/v1/workspaces", {"name": "of-cp", "from": {"workspace": "src",
                                                          "checkpoint": "base"}}),
            ("/v1/workspaces", {"name": "again", "template": "py-db"})]
        assert not any("idempotency-key" in {k.lower() for k in s[2]} for s in stub.seen)
        ws.close()
    finally:
        stub.close()


def test_checkpoints_fork_sends_name_count_labels_and_answers_a_handle_per_fork():
    forks = [dict(WS, id=f"ws_{i:016x}", name=f"twig-{i}", state="creating",
                  forked_from="cp_0123456789abcdef") for i in (1, 2, 3)]
    stub = Stub([(200, {}, WS, 0), (201, {}, {"workspaces": forks}, 0),
                 (201, {}, {"workspaces": forks[:1]}, 0), (200, {}, forks[2], 0)])
    try:
        ws = Workspace.connect("stub", url=stub.url, api_key="k", request_timeout=10)
        got = ws.checkpoints.fork("base", name="twig", count=3, labels={"x": "y"}, wait=False)
        assert [(f.id, f.name, f.state) for f in got] == [
            (w["id"], w["name"], "creating") for w in forks]
        ws.checkpoints.fork("cp_0123456789abcdef", name="twig", wait=False)
        # Each handle has a connection of its own: closing the source's and another fork's
        # leaves it working.
        ws.close()
        got[0].close()
        assert got[2].info().forked_from == "cp_0123456789abcdef"
        path = f"/v1/workspaces/{WS['id']}/checkpoints"
        assert [(p, b) for m, p, b in _sent(stub) if m == "POST"] == [
            (path + "/base/fork", {"name": "twig", "count": 3, "labels": {"x": "y"}}),
            # count 1 is berthd's default: not sent
            (path + "/cp_0123456789abcdef/fork", {"name": "twig"})]
        for w in got[1:]:
            w.close()
    finally:
        stub.close()


def test_async_forks_and_templates_against_berthd(berthd):
    async def main():
        ws = await AsyncWorkspace.create(name=unique("asrc"))
        made = []
        try:
            await ws.stop()
            base = await ws.checkpoints.create(name="base")
            made += await ws.checkpoints.fork("base", name=unique("atwig"), count=2)
            assert [f.state for f in made] == ["running", "running"]
            assert all(isinstance(f, AsyncWorkspace) for f in made)
            made.append(await ws.fork(name=unique("anow"), checkpoint="base"))
            made.append(await AsyncWorkspace.create(name=unique("afrom"), from_workspace=ws))
            infos = [await f.info() for f in made]
            assert [i.forked_from for i in infos[:3]] == [base.id] * 3
            assert infos[3].forked_from not in (None, base.id)  # one taken now
            assert await AsyncTemplates.list() == []
            with pytest.raises(ConflictError, match="has no memory"):
                await AsyncTemplates.create(unique("acold"), ws, checkpoint="base")
            with pytest.raises(NotFoundError):
                await AsyncTemplates.get("nope")
            with pytest.raises(NotFoundError):
                await AsyncWorkspace.create(name=unique("at"), template="nope")
        finally:
            for f in made:
                await f.delete(wait=True, request_timeout=60)
                await f.close()
            await ws.delete()
            await ws.close()

    asyncio.run(main())


# --- templates built from a script -----------------------------------------------------------

def _until(what, check, timeout=60.0):
    """Waits for check() to be true, asking every 100 ms, at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _workspace_names():
    return {w.name for w in Workspace.list()}


def test_a_script_template_is_202_building_with_its_request_then_wait_raises_the_scripts_exit_and_log(berthd):
    name = unique("py-build")
    t = Templates.create(name, script="echo step-one; echo to-stderr >&2; exit 3",
                         ready="true", size="small", timeout_s=120, wait=False)
    try:
        # berthd's 202: building in a workspace of its own, no checkpoint yet, the request kept.
        assert isinstance(t, Template)
        assert (t.name, t.state, t.checkpoint_id, t.error) == (name, "building", "", None)
        assert (t.script, t.start, t.ready, t.timeout_s) == (
            "echo step-one; echo to-stderr >&2; exit 3", None, "true", 120)
        assert (t.workspace, t.image, t.cpus, t.memory_mib) == (f"template-{name}", "base", 1, 1024)
        assert t.build_log is None  # only GET /v1/templates/{tpl} carries the log
        with pytest.raises(TemplateBuildError) as e:
            Templates.wait(name, request_timeout=120)
        # The script ran through the build workspace's agent: its exit and its output.
        assert e.value.error == "the script exited with 3"
        assert e.value.build_log == "step-one\nto-stderr\n"
        assert e.value.template.state == "failed" and e.value.template.id == t.id
        assert "the script exited with 3" in str(e.value) and "step-one" in str(e.value)
        assert e.value.status is None and not e.value.retryable
        # berthd deletes a failed build's workspace; the template stays, failed, until deleted.
        _until("the failed build's workspace to be deleted",
               lambda: f"template-{name}" not in _workspace_names())
        got = Templates.get(t.id)
        assert (got.state, got.error, got.build_log) == ("failed", "the script exited with 3",
                                                          "step-one\nto-stderr\n")
        assert [(x.name, x.state, x.build_log) for x in Templates.list()] == [(name, "failed", None)]
        with pytest.raises(ConflictError) as c:
            Workspace.create(name=unique("from-failed"), template=name)
        assert c.value.status == 409 and "failed to build" in c.value.message
        with pytest.raises(AlreadyExistsError) as c:
            Templates.create(name, script="true", wait=False)
        assert "delete it to build it again" in c.value.message
    finally:
        Templates.delete(name)
    assert Templates.list() == []


def test_create_waits_by_default_until_the_build_failed_and_raises_it(berthd):
    name = unique("py-wait")
    t0 = time.monotonic()
    with pytest.raises(TemplateBuildError) as e:  # wait: the default
        Templates.create(name, script="echo half-way; sleep 1; false; echo never",
                         request_timeout=120)
    try:
        assert time.monotonic() - t0 >= 1.0  # the script's sleep: the wait outlasted the 202
        assert e.value.error == "the script exited with 1"
        assert e.value.build_log == "half-way\n"  # bash -e: stopped at false
        assert Templates.get(name).state == "failed"
    finally:
        Templates.delete(name)


def test_script_template_refusals_are_typed_and_make_nothing(berthd):
    before = _workspace_names()
    # Both forms, or neither: refused before anything is sent (status None)...
    for call in (lambda: Templates.create(unique("both"), "some-ws", script="true"),
                 lambda: Templates.create(unique("none")),
                 lambda: Templates.create(unique("half"), "some-ws", start="make dev")):
        with pytest.raises(InvalidArgumentError) as e:
            call()
        assert e.value.status is None and "script" in e.value.message
    # ... as berthd itself would refuse them.
    both = httpx.post(f"{berthd.url}/v1/templates",
                      json={"name": "both", "script": "true", "from": {"workspace": "x"}},
                      headers={"Authorization": f"Bearer {berthd.key}"}, timeout=30)
    assert both.status_code == 400
    assert both.json()["error"]["message"] == "give either 'from' or 'script', not both"
    # berthd's own checks: the builder is "template-<name>", a workspace name of at most 57.
    cases = [({"name": "a" * 49}, "at most 48 characters"),
             ({"timeout_s": 5}, "'timeout_s' must be between 10 and 7200"),
             ({"size": "huge"}, "'size' must be small, medium or large"),
             ({"script": ""}, "'script' must not be empty")]
    for extra, message in cases:
        args = {"name": unique("bad"), "script": "true", **extra}
        with pytest.raises(InvalidArgumentError) as e:
            Templates.create(**args)
        assert (e.value.status, e.value.code) == (400, "invalid_argument")
        assert message in e.value.message
    assert Templates.list() == []
    assert _workspace_names() == before


BUILDING = {"id": "tpl_00000000000000b1", "name": "py-web", "workspace_id": WS["id"],
            "checkpoint_id": "", "workspace": "template-py-web", "image": "desktop", "cpus": 2,
            "memory_mib": 2048, "disk_gib": 10, "created_by": "key_x",
            "created_at": "2026-12-04T00:00:00Z", "state": "building",
            "script": "npm ci", "start": "npm run dev", "ready": "curl -sf localhost:3000",
            "timeout_s": 600}
READY = dict(BUILDING, state="ready", checkpoint_id="cp_00000000000000b1",
             build_log="added 312 packages\n$ curl -sf localhost:3000 (exited 0 after 4 tries)\n")
# A failed build's workspace is gone, and with it what a workspace from it would be.
FAILED = {k: v for k, v in BUILDING.items()
          if k not in ("workspace", "image", "cpus", "memory_mib", "disk_gib")}
FAILED.update(state="failed", error="the script exited with 1",
              build_log="".join(f"line {i}\n" for i in range(1, 501)) + "npm ERR! missing script\n")


def test_create_waits_by_default_sending_the_script_form_once_and_polling_get_until_ready_from_a_stand_in():
    stub = Stub([(202, {}, BUILDING, 0), (200, {}, dict(BUILDING, build_log=""), 0),
                 (200, {}, READY, 0)])
    try:
        t = Templates.create("py-web", script="npm ci", start="npm run dev",
                             ready="curl -sf localhost:3000", image="desktop", size="medium",
                             timeout_s=600, url=stub.url, api_key="k")
        assert (t.state, t.checkpoint_id, t.error) == ("ready", "cp_00000000000000b1", None)
        assert (t.script, t.start, t.ready, t.timeout_s) == (
            "npm ci", "npm run dev", "curl -sf localhost:3000", 600)
        assert t.build_log == READY["build_log"]
        assert _sent(stub) == [
            ("POST", "/v1/templates", {"name": "py-web", "script": "npm ci",
                                       "start": "npm run dev",
                                       "ready": "curl -sf localhost:3000", "image": "desktop",
                                       "size": "medium", "timeout_s": 600}),
            # By id: a template deleted and built again under its name is another one.
            ("GET", "/v1/templates/tpl_00000000000000b1", None),
            ("GET", "/v1/templates/tpl_00000000000000b1", None)]
        # wait=False: berthd's 202 as it is, nothing more asked; only given fields are sent.
        stub.script[:] = [(202, {}, BUILDING, 0)]
        assert Templates.create("py-web", script="true", wait=False, url=stub.url,
                                api_key="k").state == "building"
        assert _sent(stub)[3] == ("POST", "/v1/templates", {"name": "py-web", "script": "true"})
        assert len(stub.seen) == 4
    finally:
        stub.close()


def test_wait_raises_template_build_error_with_the_error_and_the_end_of_the_log_from_a_stand_in():
    stub = Stub([(200, {}, BUILDING, 0), (200, {}, FAILED, 0)])
    try:
        with pytest.raises(TemplateBuildError) as e:
            Templates.wait("py-web", url=stub.url, api_key="k")
        err = e.value
        assert (err.error, err.build_log) == ("the script exited with 1", FAILED["build_log"])
        assert err.template.state == "failed" and err.template.workspace is None
        message = str(err)
        assert message.startswith("template_build_failed: template 'py-web' failed to build: "
                                  "the script exited with 1\n")
        # The end of the log, from a line's start, not all of it.
        assert message.endswith("line 500\nnpm ERR! missing script")
        assert "\nline 1\n" not in message and "\n…line " in message
        assert len(message) < 2200
        assert [p for _, p, _ in _sent(stub)] == ["/v1/templates/py-web",
                                                   "/v1/templates/tpl_00000000000000b1"]
        # A template that is not building is answered at once: one GET.
        stub.script[:] = [(200, {}, READY, 0)]
        assert Templates.wait("py-web", url=stub.url, api_key="k").state == "ready"
        assert len(stub.seen) == 3
    finally:
        stub.close()


def test_wait_gives_up_at_request_timeout_and_a_503_to_the_post_is_not_sent_again_from_a_stand_in():
    stub = Stub([(200, {}, BUILDING, 0)] * 20)
    try:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError) as e:
            Templates.wait("py-web", url=stub.url, api_key="k", request_timeout=1.0)
        assert time.monotonic() - t0 < 3.0
        assert "still building" in e.value.message and "template-py-web" in e.value.message
        assert 2 <= len(stub.seen) <= 4  # polled, not hammered: 0.5 s, then 1 s
        assert all(m == "GET" for m, _, _ in _sent(stub))
        # A 503 on the POST reaches the caller: a build is never started twice by the SDK.
        stub.script[:] = [WAKING, (202, {}, BUILDING, 0)]
        n = len(stub.seen)
        with pytest.raises(UnavailableError):
            Templates.create("py-web", script="true", url=stub.url, api_key="k")
        assert [m for m, _, _ in _sent(stub)[n:]] == ["POST"]
    finally:
        stub.close()


def test_async_templates_create_waits_for_ready_and_wait_raises_a_failed_build_from_a_stand_in():
    stub = Stub([(202, {}, BUILDING, 0), (200, {}, READY, 0), (200, {}, FAILED, 0)])

    async def main():
        conn = {"url": stub.url, "api_key": "k"}
        t = await AsyncTemplates.create("py-web", script="npm ci", **conn)
        assert (t.state, t.checkpoint_id) == ("ready", "cp_00000000000000b1")
        with pytest.raises(TemplateBuildError, match="the script exited with 1"):
            await AsyncTemplates.wait("py-web", **conn)
        with pytest.raises(InvalidArgumentError):
            await AsyncTemplates.create("py-web", "ws", script="npm ci", **conn)

    try:
        asyncio.run(main())
        assert [(m, p) for m, p, _ in _sent(stub)] == [
            ("POST", "/v1/templates"), ("GET", "/v1/templates/tpl_00000000000000b1"),
            ("GET", "/v1/templates/py-web")]
    finally:
        stub.close()
