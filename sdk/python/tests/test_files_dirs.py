"""ws.files.watch_dir (?watch=1 through berthd) and directories as tar both ways
(upload_dir / download_dir, ?archive=tar), with the client refusing a hostile archive."""

import io
import os
import stat
import tarfile
import threading
import time

import pytest

from berth import (AsyncWorkspace, InvalidArgumentError, NotFoundError, UnavailableError,
                   WatchEvent, Workspace)
from berth._tar import DirExtract
from conftest import unique


@pytest.fixture(scope="module")
def ws(berthd):
    w = Workspace.create(name=unique("dirs"))
    yield w
    w.delete()
    w.close()


class Events:
    def __init__(self):
        self.seen = []
        self.lock = threading.Lock()

    def __call__(self, ev):
        assert isinstance(ev, WatchEvent)
        with self.lock:
            self.seen.append((ev.type, ev.path, ev.is_dir))

    def wait_for(self, item, timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                if item in self.seen:
                    return
            assert time.monotonic() < deadline, f"{item} not in {self.seen}"
            time.sleep(0.02)


def test_watch_dir_reports_changes_until_stop(ws, scratch):
    events = Events()
    exits = []
    h = ws.files.watch_dir(scratch, events, recursive=True, on_exit=exits.append)
    ws.files.write(f"{scratch}/a.txt", "1")
    # files.write is atomic (a temporary file renamed into place): a.txt is moved in.
    events.wait_for(("moved_to", f"{scratch}/a.txt", False))
    ws.files.make_dir(f"{scratch}/sub")
    events.wait_for(("created", f"{scratch}/sub", True))
    # recursive: a file in the new subdirectory is seen too.
    ws.commands.run(f"sleep 0.2; echo x > {scratch}/sub/b.txt")
    events.wait_for(("created", f"{scratch}/sub/b.txt", False))
    ws.files.remove(f"{scratch}/a.txt")
    events.wait_for(("deleted", f"{scratch}/a.txt", False))
    h.stop()
    h.wait(request_timeout=10)
    assert exits == [None] and not h.running
    n = len(events.seen)
    ws.files.write(f"{scratch}/after.txt", "2")
    time.sleep(0.5)
    assert len(events.seen) == n, "an event arrived after stop()"


def test_watch_dir_errors_at_once_for_a_missing_directory(ws, scratch):
    with pytest.raises(NotFoundError):
        ws.files.watch_dir(f"{scratch}/missing", lambda e: None)


def test_watch_dir_ends_with_unavailable_error_when_the_workspace_stops(berthd, scratch):
    w = Workspace.create(name=unique("watchstop"))
    exits = []
    h = w.files.watch_dir(scratch, lambda e: None, on_exit=exits.append)
    w.stop(force=True, wait=False)
    stopped_at = time.monotonic()
    with pytest.raises(UnavailableError):
        h.wait(request_timeout=30)
    assert time.monotonic() - stopped_at < 10
    assert len(exits) == 1 and isinstance(exits[0], UnavailableError)
    w.close()


def _tree(root):
    """Every entry under root: (relative path, kind, content or link target, mode)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                out[rel] = ("file", open(p, "rb").read(), stat.S_IMODE(st.st_mode))
    return out


def _make_tree(root):
    os.makedirs(f"{root}/src/deep/er")
    with open(f"{root}/src/main.py", "w") as f:
        f.write("print('hi')\n")
    with open(f"{root}/src/deep/er/big.bin", "wb") as f:
        f.write(os.urandom(3 * 1024 * 1024 + 17))  # several chunks, not a block multiple
    with open(f"{root}/run.sh", "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod(f"{root}/run.sh", 0o755)
    open(f"{root}/empty", "w").close()
    long = "n" * 150  # over ustar's 100 characters: a pax header carries it
    with open(f"{root}/{long}.txt", "w") as f:
        f.write("long")
    with open(f"{root}/héllo wörld.txt", "w") as f:
        f.write("unicode")
    os.symlink("src/main.py", f"{root}/link")


def test_upload_dir_and_download_dir_round_trip(ws, scratch, tmp_path):
    local = str(tmp_path / "local")
    _make_tree(local)
    up = ws.files.upload_dir(local, f"{scratch}/proj")
    assert up.entries == len(_tree(local)) and up.bytes > 3 * 1024 * 1024
    # The guest's copy, seen through the agent.
    assert ws.files.read(f"{scratch}/proj/src/main.py") == "print('hi')\n"
    assert ws.files.stat(f"{scratch}/proj/link").type == "symlink"
    assert ws.files.stat(f"{scratch}/proj/run.sh").mode == 0o755
    back = str(tmp_path / "back")
    down = ws.files.download_dir(f"{scratch}/proj", back)
    assert _tree(back) == _tree(local)
    assert down.entries == up.entries and down.bytes == up.bytes
    # Into an existing directory: files are replaced, others stay.
    with open(f"{back}/src/main.py", "w") as f:
        f.write("changed")
    with open(f"{back}/mine.txt", "w") as f:
        f.write("kept")
    ws.files.download_dir(f"{scratch}/proj", back)
    assert open(f"{back}/src/main.py").read() == "print('hi')\n"
    assert open(f"{back}/mine.txt").read() == "kept"


def test_dir_errors(ws, scratch, tmp_path):
    with pytest.raises(InvalidArgumentError):
        ws.files.upload_dir(str(tmp_path / "nothing-here"), f"{scratch}/x")
    with pytest.raises(NotFoundError):
        ws.files.download_dir(f"{scratch}/missing", str(tmp_path / "d"))
    assert not (tmp_path / "d").exists()


def _tar(*members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for ti, data in members:
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _file(name, data=b"x"):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    return ti, data


def _link(name, target):
    ti = tarfile.TarInfo(name)
    ti.type, ti.linkname = tarfile.SYMTYPE, target
    return ti, None


@pytest.mark.parametrize("members", [
    [_file("/etc/evil")],
    [_file("../evil")],
    [_file("ok/../../evil")],
    [_link("out", "/tmp"), _file("out/evil")],
    [_link("out", ".."), _file("out/evil")],
], ids=["absolute", "dotdot", "dotdot-inside", "through-absolute-symlink",
        "through-relative-symlink"])
def test_an_archive_entry_that_would_land_outside_is_refused(tmp_path, members):
    target = tmp_path / "target"
    x = DirExtract(str(target))
    data = _tar(*members)
    with pytest.raises(InvalidArgumentError):
        # Fed in odd pieces, as a network would.
        for i in range(0, len(data), 777):
            x.feed(data[i:i + 777])
        x.finish()
    assert not (tmp_path / "evil").exists() and not os.path.exists("/tmp/evil")


def test_an_existing_symlink_on_disk_is_not_followed(tmp_path):
    target = tmp_path / "target"
    outside = tmp_path / "outside"
    os.makedirs(target)
    os.makedirs(outside)
    os.symlink(str(outside), target / "sneaky")
    x = DirExtract(str(target))
    with pytest.raises(InvalidArgumentError):
        x.feed(_tar(_file("sneaky/evil")))
    assert os.listdir(outside) == []
    # A symlink entry replaces an old file, never writes through an old link.
    x2 = DirExtract(str(target))
    x2.feed(_tar(_file("sneaky", b"plain now")))
    x2.finish()
    assert not os.path.islink(target / "sneaky")
    assert open(target / "sneaky", "rb").read() == b"plain now"


def test_set_id_bits_are_cleared_and_fifos_left_out(tmp_path):
    ti, data = _file("suid", b"#!/bin/sh\n")
    ti.mode = 0o4755
    fifo = tarfile.TarInfo("pipe")
    fifo.type = tarfile.FIFOTYPE
    x = DirExtract(str(tmp_path / "t"))
    x.feed(_tar((ti, data), (fifo, None)))
    x.finish()
    assert stat.S_IMODE(os.stat(tmp_path / "t" / "suid").st_mode) == 0o755
    assert not (tmp_path / "t" / "pipe").exists() and x.skipped == 1


def test_async_dirs_and_watch(berthd, scratch, tmp_path):
    async def main():
        ws = await AsyncWorkspace.create(name=unique("adirs"))
        local = str(tmp_path / "src")
        _make_tree(local)
        seen = []

        async def on_event(ev):
            seen.append(ev.path)

        h = await ws.files.watch_dir(scratch, on_event)
        await ws.files.upload_dir(local, f"{scratch}/p")
        deadline = time.monotonic() + 20
        while f"{scratch}/p" not in seen:
            assert time.monotonic() < deadline, seen
            await __import__("asyncio").sleep(0.02)
        await h.stop()
        await h.wait(request_timeout=10)
        await ws.files.download_dir(f"{scratch}/p", str(tmp_path / "back"))
        assert _tree(str(tmp_path / "back")) == _tree(local)
        await ws.delete()
        await ws.close()

    import asyncio
    asyncio.run(main())
