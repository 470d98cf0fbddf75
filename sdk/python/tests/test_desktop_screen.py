"""ws.desktop's eyes and hands (GET …/desktop/screenshot, POST …/desktop/actions) against
berthd with a real RFB server at the workspace's VNC socket: QEMU with a VGA screen and no
guest (-S), as tests/integration/desktop_support.cc runs it, listening where berthd looks
(<data>/workspaces/<id>/run/vnc.sock, controller/workspace/layout.h). Also the typed
LockedError while a person holds the desktop, and the SDK's own checks of actions, which
refuse what berthd would refuse without calling it."""

import asyncio
import os
import struct
import subprocess
import time
from typing import Iterator, Tuple

import pytest

from berth import (AsyncWorkspace, Click, Drag, HoldKey, InvalidArgumentError, Key, LockedError,
                   Move, Screenshot, Scroll, TypeText, UnavailableError, Wait, Workspace)
from berth._core import resolve_config
from berth._sync import Connection
from berth.types import WorkspaceInfo
from conftest import free_port, unique


class Qemu:
    """qemu-system-x86_64 with a std VGA screen on a unix VNC socket; the CPU never starts."""

    def __init__(self, socket_path: str, log_path: str) -> None:
        os.makedirs(os.path.dirname(socket_path), exist_ok=True)
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            ["qemu-system-x86_64", "-machine", "pc", "-accel", "tcg", "-m", "64", "-nodefaults",
             "-vga", "std", "-S", "-display", "vnc=unix:" + socket_path],
            stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not os.path.exists(socket_path):
            assert self.proc.poll() is None, f"QEMU exited: {open(log_path).read()}"
            assert time.monotonic() < deadline, "QEMU's VNC socket did not appear in 30 s"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def ws(berthd) -> Iterator[Workspace]:
    w = Workspace.create(name=unique("screen"))
    run = os.path.join(berthd.data, "workspaces", w.id, "run")
    qemu = Qemu(os.path.join(run, "vnc.sock"), os.path.join(berthd.tmp, f"qemu-{w.id}.log"))
    try:
        yield w
    finally:
        qemu.stop()
        w.delete()
        w.close()


def png_size(data: bytes) -> Tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def jpeg_size(data: bytes) -> Tuple[int, int]:
    """The size in a baseline or progressive JPEG's SOF segment."""
    assert data[:2] == b"\xff\xd8" and data.rstrip(b"\0")[-2:] == b"\xff\xd9", "not a JPEG"
    at = 2
    while at + 9 < len(data):
        assert data[at] == 0xFF
        marker = data[at + 1]
        length = struct.unpack(">H", data[at + 2:at + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            height, width = struct.unpack(">HH", data[at + 5:at + 9])
            return width, height
        at += 2 + length
    raise AssertionError("no SOF segment")


def test_screenshot_png_scaled_and_jpeg(ws: Workspace) -> None:
    shot = ws.desktop.screenshot()
    assert isinstance(shot, Screenshot) and shot.format == "png" and shot.mime_type == "image/png"
    w, h = shot.screen.width, shot.screen.height
    assert w >= 320 and h >= 200  # QEMU's VGA text screen: 720x400
    assert png_size(shot.data) == (w, h)
    assert shot.image == shot.screen and not shot.scaled
    assert shot.to_screen(10, 20) == (10, 20)

    half = ws.desktop.screenshot(scale=0.5)
    assert half.screen == shot.screen
    assert (half.image.width, half.image.height) == (int(w * 0.5 + 0.5), int(h * 0.5 + 0.5))
    assert png_size(half.data) == (half.image.width, half.image.height)
    assert half.to_screen(0, 0) == (1, 1)  # the centre of the 2x2 box the pixel averages
    assert half.to_screen(half.image.width - 1, half.image.height - 1) == (w - 1, h - 1)

    jpeg = ws.desktop.screenshot(format="jpeg", quality=50)
    assert jpeg.format == "jpeg" and jpeg.mime_type == "image/jpeg"
    assert jpeg_size(jpeg.data) == (w, h) and jpeg.image == jpeg.screen

    for bad in ({"scale": 0}, {"scale": 1.5}, {"format": "gif"}, {"quality": 0}):
        with pytest.raises(InvalidArgumentError):
            ws.desktop.screenshot(**bad)  # type: ignore[arg-type]


def test_actions_click_and_type(ws: Workspace) -> None:
    screen = ws.desktop.screenshot().screen
    done = ws.desktop.act([Click(10, 10), TypeText("hello, world\n")])
    assert done.done == 2 and done.screen == screen
    assert ws.desktop.click(screen.width - 1, screen.height - 1, count=2).done == 1
    assert ws.desktop.type("ls -la\t~").done == 1
    assert ws.desktop.key("ctrl+shift+t").done == 1
    assert ws.desktop.scroll(5, 5, dy=3, dx=-1).done == 1
    assert ws.desktop.drag((1, 1), (50, 40)).done == 1
    assert ws.desktop.move(3, 4).done == 1
    batch = [Move(1, 1), Click(button="right"), Drag([(1, 1), (2, 2), (3, 3)]), Scroll(dy=-2),
             Key("Return"), HoldKey("shift", 10), Wait(10),
             {"type": "mouse_down", "x": 2, "y": 2}, {"type": "mouse_up"}]
    assert ws.desktop.act(batch).done == len(batch)
    # Only the screen's bounds are berthd's to check: a 400 from it.
    with pytest.raises(InvalidArgumentError) as off:
        ws.desktop.click(screen.width, 0)
    assert off.value.status == 400


def test_takeover_locks_actions_until_release(ws: Workspace) -> None:
    taken = ws.desktop.take_over(reason="solve a captcha")
    try:
        assert taken.holder == "human"
        with pytest.raises(LockedError) as locked:
            ws.desktop.click(10, 10)
        e = locked.value
        assert e.status == 423 and e.code == "locked" and e.retryable is False
        assert e.holder == "human" and e.since == taken.since and e.since
        assert e.by == taken.by and e.reason == "solve a captcha" and e.private is False
        # Not private: the agent still sees the screen.
        assert ws.desktop.screenshot(scale=0.25).image.width > 0
        # A private takeover (renewing one does not change it): screenshots are refused too.
        ws.desktop.release()
        ws.desktop.take_over(private=True)
        with pytest.raises(LockedError) as hidden:
            ws.desktop.screenshot()
        assert hidden.value.private is True and hidden.value.holder == "human"
    finally:
        assert ws.desktop.release(note="done").holder == "agent"
    assert ws.desktop.type("back").done == 1


def test_async_screenshot_actions_and_locked(ws: Workspace) -> None:
    async def main() -> None:
        async with await AsyncWorkspace.connect(ws.id) as aws:
            shot = await aws.desktop.screenshot(scale=0.5)
            assert png_size(shot.data) == (shot.image.width, shot.image.height)
            assert (await aws.desktop.click(*shot.to_screen(10, 10))).done == 1
            assert (await aws.desktop.act([Key("Escape"), TypeText("ok")])).done == 2
            await aws.desktop.take_over()
            try:
                with pytest.raises(LockedError) as locked:
                    await aws.desktop.type("no")
                assert locked.value.holder == "human"
            finally:
                await aws.desktop.release()
            assert (await aws.desktop.type("yes")).done == 1
            assert aws.desktop.cdp_url() == ws.desktop.cdp_url()

    asyncio.run(main())


def test_actions_refused_locally(berthd) -> None:
    # A workspace handle on an address where nothing listens: a call would be an
    # UnavailableError, so an InvalidArgumentError proves the SDK refused it itself.
    dead = f"http://127.0.0.1:{free_port()}"
    conn = Connection(resolve_config(dead, "bk_none", 5.0))
    info = WorkspaceInfo(id="ws_nowhere", name="nowhere", state="running")
    with Workspace(info, conn) as nowhere:
        with pytest.raises(UnavailableError):
            nowhere.desktop.click(1, 1)  # the control: this one is sent
        refused = [
            lambda: nowhere.desktop.type("héllo"),                     # not on the en-us map
            lambda: nowhere.desktop.type("emoji \U0001F600"),
            lambda: nowhere.desktop.type("x" * 10_001),                # over 10 000 characters
            lambda: nowhere.desktop.act([Move(1, 1)] * 201),           # over 200 actions
            lambda: nowhere.desktop.act([]),
            lambda: nowhere.desktop.act([Click()]),                    # no position yet
            lambda: nowhere.desktop.act([Wait(10_000)] * 4),           # 40 s of pauses
            lambda: nowhere.desktop.act({"type": "teleport"}),
            lambda: nowhere.desktop.key("ctrl+banana"),
            lambda: nowhere.desktop.key("hyper+a"),
            lambda: nowhere.desktop.click(1, 1, count=4),
            lambda: nowhere.desktop.scroll(1, 1, dy=51),
            lambda: nowhere.desktop.click(-1, 5),
            lambda: nowhere.desktop.act(Drag([(1, 1)])),
            lambda: nowhere.desktop.screenshot(scale=0.01),
        ]
        for call in refused:
            with pytest.raises(InvalidArgumentError) as e:
                call()
            assert e.value.status is None and e.value.code == "invalid_argument"
    cdp = Workspace(info, Connection(resolve_config("http://h:8420/", "k", 5.0))).desktop.cdp_url()
    assert cdp == "http://h:8420/v1/workspaces/ws_nowhere/desktop/cdp"
