"""ws.checkpoints (POST|GET …/checkpoints, GET|DELETE …/checkpoints/{cp}, POST …/restore,
GET …/diff) and `with ws.checkpoint():`, against berthd on the unix transport. libvirt's test
driver cannot snapshot a running domain's disks (berthd answers a 500 naming libvirt), so checkpoints are
taken of STOPPED workspaces here; a restore into a running one (stopped, restored, started)
works on it, and is what proves the SDK's wait. For the same reason a checkpoint with memory
(of a running workspace) is not taken here: berthd's refusal of one of a stopped workspace
shows that memory=True reaches it, and a stand-in server (test_deadlines.Stub) what the SDK
sends and makes of the answer. That the disks really come back is
tests/e2e/berthd/sdk_vm_checks.py's to show, on a real VM.

A diff needs a guest that mounts the checkpoint's disks plugged into its VM: libvirt's test
driver plugs in nothing and the unix transport's host agent mounts nothing (either is berthd's
failed_precondition), so here berthd's refusals are real, and the request the SDK sends and what
it makes of a full answer are shown against the stand-in."""

import asyncio
import json
import re
import time
from urllib.parse import parse_qsl, unquote, urlsplit

import pytest

from berth import (AlreadyExistsError, AsyncWorkspace, Checkpoint, CheckpointDiff, ConflictError,
                   DiffCounts, FileChange, InvalidArgumentError, NotFoundError, PackageChange,
                   RestoreResult, TimeoutError, Workspace)
from berth._core import resolve_config
from berth._sync import Connection
from berth.types import WorkspaceInfo
from conftest import unique
from test_deadlines import WS, WAKING, Stub


class Boom(Exception):
    """The block's own failure, a type nothing else raises."""


@pytest.fixture
def ws(berthd):
    w = Workspace.create(name=unique("cp"))
    w.stop()
    yield w
    w.delete()
    w.close()


def test_create_list_get_delete_round_trip_on_a_stopped_workspace(ws):
    assert ws.checkpoints.list() == []
    cp = ws.checkpoints.create(name="first")
    assert isinstance(cp, Checkpoint)
    assert cp.id.startswith("cp_") and cp.name == "first" and cp.workspace_id == ws.id
    assert (cp.kind, cp.memory, cp.taken_while, cp.pause_ms) == ("manual", False, "stopped", None)
    assert cp.created_by.startswith("key_") and cp.created_at
    unnamed = ws.checkpoints.create()
    assert unnamed.name == unnamed.id  # no name: its id is its name
    assert [c.id for c in ws.checkpoints.list()] == [unnamed.id, cp.id]  # newest first
    assert ws.checkpoints.get("first").id == cp.id == ws.checkpoints.get(cp.id).id
    with pytest.raises(AlreadyExistsError):
        ws.checkpoints.create(name="first")
    assert ws.checkpoints.delete("first").id == cp.id
    with pytest.raises(NotFoundError):
        ws.checkpoints.get("first")
    assert [c.id for c in ws.checkpoints.list()] == [unnamed.id]


def test_restore_answers_the_workspace_and_its_before_restore_undo_checkpoint(ws):
    cp = ws.checkpoints.create(name="base")
    r = ws.checkpoints.restore("base")
    assert isinstance(r, RestoreResult)
    assert r.workspace.id == ws.id and r.workspace.state == "stopped" and ws.state == "stopped"
    assert r.undo is not None and r.undo.kind == "before_restore" and r.undo.id != cp.id
    assert [c.id for c in ws.checkpoints.list()][:2] == [r.undo.id, cp.id]
    # undo=False keeps no checkpoint of the state it discards.
    n = len(ws.checkpoints.list())
    assert ws.checkpoints.restore(cp.id, undo=False).undo is None
    assert len(ws.checkpoints.list()) == n
    with pytest.raises(NotFoundError):
        ws.checkpoints.restore("no-such-checkpoint")


def test_restore_of_a_running_workspace_waits_until_it_runs_again(ws):
    ws.checkpoints.create(name="stopped-state")
    ws.start()
    r = ws.checkpoints.restore("stopped-state")  # berthd answers "starting"; the SDK waits
    assert r.workspace.state == "running" and ws.state == "running"
    assert ws.info().state == "running"
    # berthd stops it first, so the undo checkpoint is of the stopped workspace.
    assert r.undo is not None and r.undo.kind == "before_restore"
    r = ws.checkpoints.restore("stopped-state", wait=False)
    assert r.workspace.state == "starting"  # what berthd answered, not waited for
    ws.stop()  # berthd lets a stop wait for the boot


def test_with_checkpoint_rolls_back_when_the_block_raises_and_reraises_its_exception(ws):
    scope = ws.checkpoint(name="before-step")
    with pytest.raises(Boom, match="step failed"):
        with scope as cp:
            assert ws.checkpoints.list()[0].id == cp.id
            raise Boom("step failed")
    assert scope.restored is not None and scope.rollback_error is None
    undo = scope.restored.undo
    assert undo is not None
    listed = ws.checkpoints.list()
    assert [(c.id, c.kind) for c in listed][:2] == [(undo.id, "before_restore"), (cp.id, "manual")]
    # berthd's timeline: restored to cp, the failed state kept as the undo checkpoint.
    assert [(e.data.get("checkpoint"), e.data.get("undo")) for e in ws.events(type="restored")] \
        == [(cp.id, undo.id)]


def test_with_checkpoint_rollback_of_a_running_workspace_returns_once_it_runs(ws):
    scope = ws.checkpoint()
    with pytest.raises(Boom):
        with scope:
            ws.start()
            raise Boom()
    assert scope.restored is not None and scope.restored.workspace.state == "running"
    assert ws.info().state == "running"
    ws.stop()


def test_with_checkpoint_success_keeps_the_checkpoint_and_keep_false_deletes_it(ws):
    with ws.checkpoint(name="kept") as kept:
        pass
    assert ws.checkpoints.get("kept").id == kept.id
    with ws.checkpoint(name="dropped", keep=False) as dropped:
        assert ws.checkpoints.get("dropped").id == dropped.id
    assert [c.id for c in ws.checkpoints.list()] == [kept.id]  # no undo: nothing restored


def test_with_checkpoint_chains_a_failed_rollback_to_the_block_exception(ws):
    scope = ws.checkpoint(name="vanishes")
    with pytest.raises(Boom) as caught:
        with scope as cp:
            ws.checkpoints.delete(cp.id)  # the rollback's restore will find nothing
            raise Boom("original")
    assert str(caught.value) == "original"  # the block's exception, not the restore's
    assert isinstance(scope.rollback_error, NotFoundError)
    assert caught.value.__context__ is scope.rollback_error
    assert any("vanishes" in n and "failed" in n for n in getattr(caught.value, "__notes__", []))


def test_with_checkpoint_leaves_the_disks_alone_on_keyboard_interrupt(ws):
    scope = ws.checkpoint(name="interrupted")
    with pytest.raises(KeyboardInterrupt):
        with scope:
            raise KeyboardInterrupt
    assert scope.restored is None
    assert [c.kind for c in ws.checkpoints.list()] == ["manual"]  # no before_restore


def test_async_with_checkpoint_rolls_back_when_the_block_raises(berthd):
    async def main():
        ws = await AsyncWorkspace.create(name=unique("acp"))
        try:
            await ws.stop()
            scope = ws.checkpoint(name="async-before")
            with pytest.raises(Boom):
                async with scope as cp:
                    raise Boom()
            assert scope.restored is not None and scope.restored.undo is not None
            kinds = [(c.id, c.kind) for c in await ws.checkpoints.list()]
            assert kinds == [(scope.restored.undo.id, "before_restore"), (cp.id, "manual")]
            async with ws.checkpoint(name="async-dropped", keep=False):
                pass
            assert len(await ws.checkpoints.list()) == 2
            assert (await ws.checkpoints.delete("async-before")).id == cp.id
        finally:
            await ws.delete()
            await ws.close()

    asyncio.run(main())


def test_memory_of_a_stopped_workspace_is_berthds_conflict_and_takes_nothing(ws):
    with pytest.raises(ConflictError) as e:
        ws.checkpoints.create(name="warm", memory=True)
    assert e.value.status == 409 and e.value.code == "failed_precondition"
    assert "no memory to checkpoint" in e.value.message  # berthd says so only when asked for memory
    with pytest.raises(ConflictError, match="no memory"):
        with ws.checkpoint(name="warm-scope", memory=True):
            pytest.fail("the block runs only once the checkpoint is taken")
    assert ws.checkpoints.list() == []
    # memory=False is the default, and a checkpoint of the disks.
    assert ws.checkpoints.create(memory=False).memory is False


def test_memory_true_is_sent_and_the_pause_read_back_from_a_stand_in():
    taken = {"id": "cp_0123456789abcdef", "workspace_id": WS["id"], "name": "warm",
             "kind": "manual", "memory": True, "parent": None, "taken_while": "running",
             "pause_ms": 312, "size_bytes": 1 << 20, "created_by": "key_x",
             "created_at": "2026-12-04T00:00:00Z"}
    stub = Stub([(200, {}, WS, 0), (201, {}, taken, 0), (201, {}, taken, 0), (201, {}, taken, 0)])
    try:
        ws = Workspace.connect("stub", url=stub.url, api_key="k", request_timeout=10)
        cp = ws.checkpoints.create(name="warm", memory=True)
        assert (cp.memory, cp.pause_ms, cp.taken_while) == (True, 312, "running")
        with ws.checkpoint(memory=True) as scoped:
            assert scoped.memory
        ws.checkpoints.create()
        posts = [(s[1], json.loads(b)) for s, b in zip(stub.seen, stub.bodies) if s[0] == "POST"]
        path = f"/v1/workspaces/{WS['id']}/checkpoints"
        assert posts == [(path, {"name": "warm", "memory": True}), (path, {"memory": True}),
                         (path, {})]  # without memory: the field is not sent, berthd's default
        ws.close()
    finally:
        stub.close()


# A diff as berthd answers it (controller/api/checkpoint_routes.cc, common/protocol/diff.h).
DIFF = {
    "from": "cp_0123456789abcdef", "to": "current", "paths": ["/workspace", "/home/agent"],
    "files": {
        "added": [{"path": "/workspace/app/x.js", "type": "file", "size": 12},
                  {"path": "/workspace/node_modules", "type": "dir", "size": 4096, "entries": 5}],
        "changed": [{"path": "/home/agent/.bashrc", "type": "file", "size": 3771}],
        "removed": [{"path": "/workspace/old", "type": "symlink", "size": 0}],
        "counts": {"added": 7, "changed": 1, "removed": 1},
        "truncated": True},
    "packages": {"installed": [{"name": "cowsay", "version": "3.03"}],
                 "changed": [{"name": "curl", "from": "7.88.1", "to": "8.5.0"}],
                 "removed": [{"name": "vim", "version": "2:9.0.1378"}]},
    "took_ms": 1234}


# berthd's refusal of a diff on the unix transport (see the module's docstring).
NO_DISKS = r"plugging the checkpoint's disks in: .*not supported|it mounts no disks"


def _diff_request(seen):
    """The path and the query of a request the stand-in saw, decoded."""
    method, target, _ = seen
    parts = urlsplit(target)
    return method, unquote(parts.path), dict(parse_qsl(parts.query, keep_blank_values=True))


def test_diff_sends_to_and_max_entries_and_parses_the_whole_answer_from_a_stand_in():
    stub = Stub([(200, {}, WS, 0), (200, {}, DIFF, 0), (200, {}, DIFF, 0), (200, {}, DIFF, 0)])
    try:
        ws = Workspace.connect("stub", url=stub.url, api_key="k", request_timeout=10)
        d = ws.checkpoints.diff("before upgrade/1", to="after #2&x", max_entries=50)
        d2 = ws.checkpoints.diff("cp_0123456789abcdef")
        ws.checkpoints.diff("base", to="cp_fedcba9876543210", max_entries=10000)
        base = f"/v1/workspaces/{WS['id']}/checkpoints"
        # The checkpoint's name is one path segment (its / and space encoded), `to` a query
        # value; without a `to` the SDK asks for "current", and max_entries is sent only when
        # given (berthd's default 1000).
        assert stub.seen[1][1].startswith(f"{base}/before%20upgrade%2F1/diff?")
        assert [_diff_request(s) for s in stub.seen[1:]] == [
            ("GET", f"{base}/before upgrade/1/diff", {"to": "after #2&x", "max_entries": "50"}),
            ("GET", f"{base}/cp_0123456789abcdef/diff", {"to": "current"}),
            ("GET", f"{base}/base/diff", {"to": "cp_fedcba9876543210", "max_entries": "10000"})]
        assert isinstance(d, CheckpointDiff) and d.raw == DIFF and d2 == d
        assert (d.from_, d.to, d.paths, d.took_ms) == ("cp_0123456789abcdef", "current",
                                                       ["/workspace", "/home/agent"], 1234)
        assert d.files.added == [FileChange("/workspace/app/x.js", "file", 12, 0),
                                 FileChange("/workspace/node_modules", "dir", 4096, 5)]
        assert d.files.changed == [FileChange("/home/agent/.bashrc", "file", 3771)]
        assert d.files.removed == [FileChange("/workspace/old", "symlink")]
        assert d.files.counts == DiffCounts(added=7, changed=1, removed=1)
        assert d.files.truncated is True
        assert d.packages.installed == [PackageChange("cowsay", version="3.03")]
        assert d.packages.changed == [PackageChange("curl", from_="7.88.1", to="8.5.0")]
        assert d.packages.removed == [PackageChange("vim", version="2:9.0.1378")]
        ws.close()
    finally:
        stub.close()


def test_diff_reads_a_sparse_answer_tolerantly_and_is_sent_again_after_a_503_retry_after():
    sparse = {"from": "cp_a", "to": "cp_b", "files": {"added": [{"path": "/workspace/n",
                                                                 "type": "file"}, "junk"]},
              "later": {"a field": "an older SDK ignores"}}
    stub = Stub([(200, {}, WS, 0), WAKING, (200, {}, sparse, 0)])
    try:
        ws = Workspace.connect("stub", url=stub.url, api_key="k", request_timeout=10)
        d = ws.checkpoints.diff("cp_a", to="cp_b")
        # A GET changes nothing: a 503 with Retry-After (a workspace waking) is waited out.
        assert [s[0] for s in stub.seen[1:]] == ["GET", "GET"]
        assert (d.from_, d.to, d.paths, d.took_ms) == ("cp_a", "cp_b", [], 0)
        assert d.files.added == [FileChange("/workspace/n", "file")]
        assert (d.files.changed, d.files.removed, d.files.truncated) == ([], [], False)
        assert d.files.counts == DiffCounts() and d.packages.installed == []
        ws.close()
    finally:
        stub.close()


def test_diff_waits_past_the_connections_request_timeout_as_a_call_that_may_boot_the_workspace():
    # A connection whose own request_timeout (0.5 s) an ordinary call keeps to, and a diff
    # that takes 1.5 s: it may boot the workspace, so its default is the boot wait's (300 s).
    stub = Stub([(200, {}, DIFF, 1.5), (200, {}, {"id": "cp_x"}, 1.5), (200, {}, DIFF, 1.5)])
    conn = Connection(resolve_config(stub.url, "k", 0.5))
    try:
        ws = Workspace(WorkspaceInfo.from_json(WS), conn)
        assert ws.checkpoints.diff("base").took_ms == 1234
        with pytest.raises(TimeoutError):
            ws.checkpoints.get("base")
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):  # request_timeout given: it bounds the diff
            ws.checkpoints.diff("base", request_timeout=0.5)
        assert time.monotonic() - t0 < 1.4
    finally:
        conn.close()
        stub.close()


def test_async_diff_sends_the_same_request_and_parses_the_answer():
    stub = Stub([(200, {}, WS, 0), (200, {}, DIFF, 0)])

    async def main():
        ws = await AsyncWorkspace.connect("stub", url=stub.url, api_key="k", request_timeout=10)
        try:
            d = await ws.checkpoints.diff("base", to="next", max_entries=3)
            assert isinstance(d, CheckpointDiff) and d.files.counts.added == 7
            assert d.packages.changed[0].to == "8.5.0"
        finally:
            await ws.close()

    try:
        asyncio.run(main())
        assert _diff_request(stub.seen[1]) == (
            "GET", f"/v1/workspaces/{WS['id']}/checkpoints/base/diff",
            {"to": "next", "max_entries": "3"})
    finally:
        stub.close()


def test_diff_against_berthd_unknown_checkpoints_bad_arguments_and_the_host_agents_refusal(ws):
    cp = ws.checkpoints.create(name="diff-base")
    with pytest.raises(NotFoundError) as e:
        ws.checkpoints.diff("no-such-checkpoint")
    assert e.value.status == 404 and "no-such-checkpoint" in e.value.message
    with pytest.raises(NotFoundError):
        ws.checkpoints.diff("diff-base", to="no-such-checkpoint")
    with pytest.raises(InvalidArgumentError) as bad:
        ws.checkpoints.diff("current", to="diff-base")
    assert bad.value.status == 400
    with pytest.raises(InvalidArgumentError) as bad:
        ws.checkpoints.diff("diff-base", max_entries=0)
    assert bad.value.status == 400 and "max_entries" in bad.value.message
    assert ws.info().state == "stopped"  # refused before the workspace was woken
    # A real checkpoint: berthd starts the workspace (its host agent) and plugs the checkpoint's
    # disks in, which libvirt's test driver does not do; past that, the host agent mounts no
    # disks. Either is berthd's failed_precondition, its message as berthd wrote it.
    with pytest.raises(ConflictError) as refused:
        ws.checkpoints.diff(cp.id)
    assert (refused.value.status, refused.value.code) == (409, "failed_precondition")
    assert re.search(NO_DISKS, refused.value.message), refused.value.message


def test_async_diff_against_berthd_gives_the_same_typed_errors(berthd):
    async def main():
        ws = await AsyncWorkspace.create(name=unique("adiff"))
        try:
            await ws.stop()
            await ws.checkpoints.create(name="base")
            with pytest.raises(NotFoundError):
                await ws.checkpoints.diff("missing")
            with pytest.raises(ConflictError, match=NO_DISKS):
                await ws.checkpoints.diff("base", to="current")
        finally:
            await ws.delete()
            await ws.close()

    asyncio.run(main())
