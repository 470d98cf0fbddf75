"""ws.files: read, write, list, exists, stat, remove, rename, make_dir; streamed upload and
download of 1 GiB each way (sync and async clients) with the client's peak RSS staying flat
(measured in a child process) and the bytes intact (hashed, never held)."""

import hashlib
import io
import json
import os
import subprocess
import sys
import textwrap

import pytest

from berth import InvalidArgumentError, NotFoundError, Workspace
from conftest import HERE, unique


@pytest.fixture(scope="module")
def ws(berthd):
    w = Workspace.create(name=unique("files"))
    yield w
    w.delete()
    w.close()


def test_write_read_list_exists_stat(ws, scratch):
    p = f"{scratch}/sub/dir/hello.txt"
    info = ws.files.write(p, "héllo\n")  # parents made
    assert info.path == p and info.type == "file" and info.size == len("héllo\n".encode())
    assert ws.files.read(p) == "héllo\n"
    assert ws.files.read(p, format="bytes") == "héllo\n".encode()
    assert open(p, encoding="utf-8").read() == "héllo\n"  # the "guest" is this host
    ws.files.write(f"{scratch}/sub/b.bin", b"\x00\xff", mode=0o600)
    assert ws.files.stat(f"{scratch}/sub/b.bin").mode == 0o600
    ws.files.write(f"{scratch}/sub/c.txt", io.BytesIO(b"from a file object"))
    assert ws.files.read(f"{scratch}/sub/c.txt") == "from a file object"
    names = sorted((e.name, e.type) for e in ws.files.list(f"{scratch}/sub"))
    assert names == [("b.bin", "file"), ("c.txt", "file"), ("dir", "dir")]
    assert ws.files.exists(p) and not ws.files.exists(f"{scratch}/nope")
    with pytest.raises(NotFoundError):
        ws.files.read(f"{scratch}/nope")
    with pytest.raises(InvalidArgumentError):
        ws.files.read("relative/path")


def test_make_dir_rename_remove(ws, scratch):
    d = f"{scratch}/a/b/c"
    assert ws.files.make_dir(d) is True
    assert ws.files.make_dir(d) is False  # there already
    ws.files.write(f"{d}/f.txt", "x")
    moved = ws.files.rename(f"{d}/f.txt", f"{scratch}/a/g.txt")
    assert moved.path == f"{scratch}/a/g.txt"
    assert not ws.files.exists(f"{d}/f.txt") and ws.files.read(f"{scratch}/a/g.txt") == "x"
    ws.files.remove(f"{scratch}/a/g.txt")
    assert not ws.files.exists(f"{scratch}/a/g.txt")
    ws.files.remove(f"{scratch}/a")  # a directory with what is in it
    assert not os.path.exists(f"{scratch}/a")
    with pytest.raises(NotFoundError):
        ws.files.remove(f"{scratch}/a")


def test_download_iterates_and_writes_to_a_file_object(ws, scratch):
    data = os.urandom(3 * 1024 * 1024 + 5)
    with open(f"{scratch}/blob", "wb") as f:
        f.write(data)
    chunks = list(ws.files.download(f"{scratch}/blob"))
    assert len(chunks) > 1 and b"".join(chunks) == data
    out = io.BytesIO()
    assert ws.files.download(f"{scratch}/blob", out) == len(data)
    assert out.getvalue() == data
    # An upload from an iterator of chunks (chunked encoding: no length known).
    ws.files.upload(f"{scratch}/blob2", (data[i:i + 100000] for i in range(0, len(data), 100000)))
    assert open(f"{scratch}/blob2", "rb").read() == data


# The child: moves bytes through one client (sync Workspace or AsyncWorkspace) and prints, as
# JSON, its peak RSS (VmHWM) after a warm-up and at the end, the hashes and the seconds each
# direction took. Run apart so that pytest's own memory and earlier tests do not count. The
# big upload comes from a generator that makes each 1 MiB chunk as it is asked for (its index
# in the first 8 bytes, so a chunk sent twice, lost or out of order changes the hash); the big
# download is hashed as it arrives. A 64 MiB file object (Content-Length) goes up and comes
# down into a file object too. Nothing of the size of the transfer is held anywhere.
CHILD = textwrap.dedent("""
    import asyncio, hashlib, json, os, struct, sys, time
    sys.path.insert(0, sys.argv[1])
    from berth import AsyncWorkspace, Workspace

    def hwm():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

    mode, size, dest, src, name = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
    MIB = 1 << 20
    block = bytearray(bytes(range(256)) * 4096)

    def chunks(n, h):
        for i in range(n):
            block[:8] = struct.pack(">Q", i)
            c = bytes(block)
            h.update(c)
            yield c

    async def achunks(n, h):
        for c in chunks(n, h):
            yield c

    out = {}
    if mode == "sync":
        ws = Workspace.connect(name)
        # Warm-up on the same paths, so the baseline holds what any transfer costs once.
        ws.files.upload(dest + ".warm", chunks(16, hashlib.sha256()))
        for c in ws.files.download(dest + ".warm"):
            pass
        out["base"] = hwm()
        up = hashlib.sha256()
        t = time.monotonic()
        ws.files.upload(dest, chunks(size // MIB, up))
        out["up_s"] = time.monotonic() - t
        out["after_up"] = hwm()
        down, n = hashlib.sha256(), 0
        t = time.monotonic()
        for c in ws.files.download(dest):
            down.update(c)
            n += len(c)
        out["down_s"] = time.monotonic() - t
        with open(src, "rb") as f:
            ws.files.upload(dest + ".file", f)
        with open(os.devnull, "wb") as sink:
            out["down_file"] = ws.files.download(dest + ".file", sink)
    else:
        async def main():
            ws = await AsyncWorkspace.connect(name)
            await ws.files.upload(dest + ".warm", achunks(16, hashlib.sha256()))
            async for c in await ws.files.download(dest + ".warm"):
                pass
            out["base"] = hwm()
            t = time.monotonic()
            await ws.files.upload(dest, achunks(size // MIB, up))
            out["up_s"] = time.monotonic() - t
            out["after_up"] = hwm()
            n = 0
            t = time.monotonic()
            async for c in await ws.files.download(dest):
                down.update(c)
                n += len(c)
            out["down_s"] = time.monotonic() - t
            with open(src, "rb") as f:
                await ws.files.upload(dest + ".file", f)
            with open(os.devnull, "wb") as sink:
                out["down_file"] = await ws.files.download(dest + ".file", sink)
            await ws.close()
            return n
        up, down = hashlib.sha256(), hashlib.sha256()
        n = asyncio.run(main())
    out.update(peak=hwm(), down=n, up_hash=up.hexdigest(), down_hash=down.hexdigest())
    print(json.dumps(out))
""")

GIB = 1 << 30
# How far the client's peak RSS may rise over its warmed-up baseline while 1 GiB goes each
# way: 1/16 of the file, where a client that held it whole would rise by all of it.
MAX_GROWTH = 64 << 20


def _sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for c in iter(lambda: f.read(1 << 20), b""):
            h.update(c)
    return h.hexdigest()


@pytest.fixture(scope="module")
def source_file(tmp_path_factory):
    """64 MiB of random bytes on the test's side, for the file-object (Content-Length) path."""
    path = tmp_path_factory.mktemp("src") / "src.bin"
    with open(path, "wb") as f:
        for _ in range(64):
            f.write(os.urandom(1024 * 1024))
    yield str(path)
    os.remove(path)


@pytest.mark.parametrize("client", ["sync", "async"])
def test_1_gib_up_and_down_keeps_client_peak_rss_flat_and_bytes_intact(ws, scratch, source_file,
                                                                       client):
    dest = f"{scratch}/big.bin"
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, os.path.join(HERE, "..", "src"), client,
                              str(GIB), dest, source_file, ws.name],
                             capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, out.stderr
        r = json.loads(out.stdout)
        assert r["down"] == GIB and r["down_file"] == os.path.getsize(source_file)
        assert r["up_hash"] == r["down_hash"]
        assert os.path.getsize(dest) == GIB
        assert _sha256_of(f"{dest}.file") == _sha256_of(source_file)
    finally:
        for suffix in ("", ".file", ".warm"):
            if os.path.exists(dest + suffix):
                os.remove(dest + suffix)
    grew_up, grew = r["after_up"] - r["base"], r["peak"] - r["base"]
    print(f"{client}: 1 GiB up {r['up_s']:.1f} s ({GIB / 2**20 / r['up_s']:.0f} MiB/s), down "
          f"{r['down_s']:.1f} s ({GIB / 2**20 / r['down_s']:.0f} MiB/s); peak RSS "
          f"{r['base'] / 2**20:.1f} MiB after warm-up, +{grew_up / 2**20:.1f} MiB after the "
          f"upload, +{grew / 2**20:.1f} MiB at the end")
    assert grew < MAX_GROWTH, f"peak RSS grew by {grew / 2**20:.1f} MiB"
