"""ws.files: read, write, list, exists, stat, remove, rename, make_dir; streamed upload and
download of 64 MiB with the client's peak RSS staying flat (measured in a child process)."""

import hashlib
import io
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


# The child: uploads SIZE bytes from a generator and a file, downloads them to a hash, and
# prints its peak RSS (VmHWM) before and after. Run apart so that pytest's own memory and
# earlier tests do not count.
CHILD = textwrap.dedent("""
    import hashlib, os, sys
    sys.path.insert(0, sys.argv[1])
    from berth import Workspace

    def hwm():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

    size, dest, src = int(sys.argv[2]), sys.argv[3], sys.argv[4]
    ws = Workspace.connect(sys.argv[5])
    ws.files.write(dest + ".warm", b"x")               # imports and one call: the baseline
    list(ws.files.download(dest + ".warm"))
    base = hwm()
    block = bytes(range(256)) * 4096                   # 1 MiB, sent size/1MiB times
    up = hashlib.sha256()
    def gen():
        for _ in range(size // len(block)):
            up.update(block)
            yield block
    ws.files.upload(dest, gen())
    with open(src, "rb") as f:                         # and from a file (Content-Length)
        ws.files.upload(dest + ".file", f)
    down = hashlib.sha256()
    n = 0
    for chunk in ws.files.download(dest):
        down.update(chunk)
        n += len(chunk)
    with open(os.devnull, "wb") as sink:
        m = ws.files.download(dest + ".file", sink)
    print(base, hwm(), n, m, up.hexdigest(), down.hexdigest())
""")


def test_64_mib_upload_and_download_keep_memory_flat(ws, scratch):
    size = 64 * 1024 * 1024
    src = f"{scratch}/src.bin"
    with open(src, "wb") as f:
        block = os.urandom(1024 * 1024)
        for _ in range(64):
            f.write(block)
    out = subprocess.run([sys.executable, "-c", CHILD, os.path.join(HERE, "..", "src"), str(size),
                          f"{scratch}/big.bin", src, ws.name],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    base, peak, down, down_file, up_hash, down_hash = out.stdout.split()
    assert int(down) == size and int(down_file) == size
    assert up_hash == down_hash
    assert os.path.getsize(f"{scratch}/big.bin") == size
    with open(f"{scratch}/big.bin.file", "rb") as a, open(src, "rb") as b:
        assert hashlib.sha256(a.read()).digest() == hashlib.sha256(b.read()).digest()
    grew = int(peak) - int(base)
    print(f"peak RSS grew by {grew / 2**20:.1f} MiB moving 4 x 64 MiB")
    assert grew < 16 * 1024 * 1024, f"peak RSS grew by {grew} bytes"
