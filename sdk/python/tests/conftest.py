"""A real berthd for the SDK's tests, as tests/integration/vite_preview_api_test.py runs it:
--transport unix (each workspace's agent is a real berth-agent host process and its "guest"
is this host: no VM), a stand-in base image, a temp data directory, the operator key from
admin.key, and a stand-in for the desktop image's clipboard tool (desktop.clipboard_tool). One
berthd for the whole session; each test makes its own workspaces.

Needs BERTHD_BIN and BERTH_AGENT_BIN (CTest sets them to the build's binaries) and qemu-img."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Iterator

import pytest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

BERTHD = os.environ.get("BERTHD_BIN", os.path.join(REPO, "build/controller/berthd"))
AGENT = os.environ.get("BERTH_AGENT_BIN", os.path.join(REPO, "build/guest-agent/berth-agent"))
USER = "root" if os.getuid() == 0 else os.environ.get("USER", "")


class Berthd:
    def __init__(self, url: str, key: str, data: str, tmp: str, clipboard: str) -> None:
        self.url, self.key, self.data, self.tmp = url, key, data, tmp
        # The fake clipboard tool's directory: its text in `text`; a file `down` plays the
        # display not being up.
        self.clipboard = clipboard

    def env(self) -> dict:
        return {"BERTH_URL": self.url, "BERTH_API_KEY": self.key}


def _stand_in_image(data: str) -> None:
    """The base image berthd wants to see; the unix transport boots nothing from it."""
    img = os.path.join(data, "images", "base", "v1")
    os.makedirs(img)
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", os.path.join(img, "disk.qcow2"),
                    "1G"], check=True, timeout=60)
    for name, text in (("vmlinuz", ""), ("initrd.img", ""), ("image.json", "{}")):
        with open(os.path.join(img, name), "w") as f:
            f.write(text)
    os.symlink("v1", os.path.join(data, "images", "base", "current"))


# The desktop image's clipboard tool (images/recipes/desktop, /usr/local/lib/berth/clipboard)
# as berthd's tests fake it (tests/integration/berthd_desktop_test.cc): `get` prints the text,
# `set` stores stdin, exit 3 while there is no display.
_CLIPBOARD_TOOL = """#!/bin/sh
d=$(dirname "$0")
[ -e "$d/down" ] && { echo 'clipboard: the X display :0 is not up' >&2; exit 3; }
case "$1" in get) cat "$d/text" 2>/dev/null ;; set) cat > "$d/text" ;; *) exit 2 ;; esac
"""


def _clipboard_tool(tmp: str) -> str:
    """The fake tool in a directory of its own that the agent's user may enter and write in
    (the host agent may run as another user than this test)."""
    d = os.path.join(tmp, "clipboard")
    os.makedirs(d)
    tool = os.path.join(d, "clipboard")
    with open(tool, "w") as f:
        f.write(_CLIPBOARD_TOOL)
    os.chmod(tool, 0o755)
    os.chmod(d, 0o777)
    os.chmod(tmp, 0o755)
    return tool


def _kill_leftover_agents(data: str) -> None:
    """Agents of this berthd's workspaces that outlived it (berthd leaves agents running;
    the cleanup above deletes the workspaces, but a test run cut short may not get there):
    found by this run's own data directory in their command line, killed by pid."""
    marker = (os.path.join(data, "workspaces") + "/").encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker in f.read():
                    os.kill(int(pid), 9)
        except OSError:
            pass


@pytest.fixture(scope="session")
def berthd() -> Iterator[Berthd]:
    tmp = tempfile.mkdtemp(prefix="berth-sdk-test-")
    data = os.path.join(tmp, "data")
    _stand_in_image(data)
    tool = _clipboard_tool(tmp)
    config = os.path.join(data, "config.json")
    with open(config, "w") as f:
        # New disks refused only below 1 GiB free (berthd's default floor, 5 GiB and 5 %, is for
        # hosts it owns; a CI machine shares a big disk of which a few percent may be free).
        json.dump({"desktop": {"clipboard_tool": tool}, "min_free_disk": {"bytes": 1 << 30, "percent": 0}}, f)
    logf = open(os.path.join(tmp, "berthd.log"), "w")
    proc = subprocess.Popen([BERTHD, "--config", config, "--listen", "127.0.0.1:0", "--data", data,
                             "--libvirt-uri", "test:///default", "--transport", "unix",
                             "--agent-bin", AGENT, "--agent-user", USER],
                            stdout=logf, stderr=logf)
    addr, keyf = os.path.join(data, "listen.addr"), os.path.join(data, "admin.key")
    deadline = time.monotonic() + 60
    server = None
    try:
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"berthd exited with {proc.returncode}"
            if os.path.exists(addr) and os.path.exists(keyf) and open(addr).read().strip():
                server = Berthd(open(addr).read().strip(), open(keyf).read().strip(), data, tmp,
                                os.path.dirname(tool))
                break
            time.sleep(0.1)
        assert server, "berthd did not write listen.addr and admin.key within 60 s"
        old = {k: os.environ.get(k) for k in ("BERTH_URL", "BERTH_API_KEY")}
        os.environ.update(server.env())
        yield server
        # Delete what the tests left, so that their agents stop (berthd leaves them running).
        from berth import Workspace
        for ws in list(Workspace.list(url=server.url, api_key=server.key)):
            try:
                ws.delete(wait=True, request_timeout=60)
            except Exception as e:  # noqa: BLE001 - cleanup goes on
                print(f"cleanup of {ws.name}: {e}")
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        logf.close()
        _kill_leftover_agents(data)
        if proc.returncode not in (0, None):
            print(open(os.path.join(tmp, "berthd.log")).read()[-4000:])
        shutil.rmtree(tmp, ignore_errors=True)
    # Under ASan a leak or a report makes berthd's exit status non-zero.
    assert proc.returncode == 0, f"berthd exited with {proc.returncode}"


@pytest.fixture
def scratch(berthd: Berthd) -> Iterator[str]:
    """A directory of this host (the workspaces' "guest") for a test's files."""
    d = os.path.join(berthd.tmp, "guest-" + uuid.uuid4().hex[:8])
    os.makedirs(d)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
