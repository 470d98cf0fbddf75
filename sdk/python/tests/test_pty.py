"""ws.pty: a terminal through GET …/exec/ws (a real PTY of the host agent): its size, typing,
resize, kill, disconnect and reattach by tag (with the output replayed), the async client,
and a terminal whose workspace stops ending with UnavailableError within 10 s.

Typed commands print computed text ($((6*7))): the terminal echoes what is typed, so only
the computed value proves the shell ran it."""

import asyncio
import threading
import time

import pytest

from berth import (AsyncWorkspace, BerthError, CommandExitError, InvalidArgumentError,
                   NotFoundError, UnavailableError, Workspace)
from conftest import unique


@pytest.fixture(scope="module")
def ws(berthd):
    w = Workspace.create(name=unique("pty"))
    yield w
    w.delete()
    w.close()


class Screen:
    """What a terminal printed, collected from on_data (called on the client's thread)."""

    def __init__(self):
        self.data = bytearray()
        self.lock = threading.Lock()

    def __call__(self, chunk):
        assert isinstance(chunk, bytes)
        with self.lock:
            self.data += chunk

    def text(self):
        with self.lock:
            return self.data.decode("utf-8", "replace")

    def wait_for(self, needle, timeout=20):
        deadline = time.monotonic() + timeout
        while needle not in self.text():
            assert time.monotonic() < deadline, f"{needle!r} not in {self.text()[-500:]!r}"
            time.sleep(0.02)


def test_a_terminal_has_its_size_runs_what_is_typed_and_ends_with_its_exit_code(ws):
    screen = Screen()
    term = ws.pty.create(cols=100, rows=30, on_data=screen, cmd="/bin/sh", env={"X": "6"})
    assert term.pid > 0 and term.running
    term.send_stdin("stty size; echo tty=$(tty); echo $(($X*7))x\n")
    screen.wait_for("42x")
    assert "30 100" in screen.text() and "tty=/dev/pts/" in screen.text()
    term.send_stdin(b"exit 3\n")
    with pytest.raises(CommandExitError) as e:
        term.wait(request_timeout=30)
    assert e.value.exit_code == 3
    assert not term.running


def test_resize_reaches_the_process(ws):
    screen = Screen()
    term = ws.pty.create(cols=80, rows=24, on_data=screen, cmd=["/bin/sh"])
    term.resize(132, 43)
    term.send_stdin("stty size; echo $((6*7))y\n")
    screen.wait_for("42y")
    assert "43 132" in screen.text()
    with pytest.raises(InvalidArgumentError):
        term.resize(0, 10)
    term.send_stdin("exit\n")
    assert term.wait(request_timeout=30).exit_code == 0


def test_disconnect_leaves_it_running_and_connect_by_tag_replays_its_output(ws):
    tag = unique("term")
    first = Screen()
    term = ws.pty.create(on_data=first, cmd="/bin/sh", tag=tag)
    assert term.tag == tag
    term.send_stdin("echo $((6*7))before\n")
    first.wait_for("42before")
    term.disconnect()
    with pytest.raises(BerthError) as e:
        term.wait(request_timeout=10)
    assert "disconnected" in str(e.value)
    assert any(p.tag == tag and p.running for p in ws.commands.list())

    again_screen = Screen()
    again = ws.pty.connect(tag, on_data=again_screen)
    assert again.pid == term.pid
    again_screen.wait_for("42before")  # the agent's buffer, replayed
    again.send_stdin("echo $((6*7))after; exit 4\n")
    again_screen.wait_for("42after")
    assert again.wait(check=False, request_timeout=30).exit_code == 4
    with pytest.raises(NotFoundError):
        ws.pty.connect("no-such-terminal")


def test_kill_ends_the_terminal(ws):
    term = ws.pty.create(cmd="sleep 600")
    assert term.kill() is True
    r = term.wait(check=False, request_timeout=30)
    assert r.signal == "KILL" and r.exit_code == 137
    with pytest.raises(InvalidArgumentError):
        ws.pty.create(cols=0, rows=24)


def test_wait_has_a_deadline_and_the_terminal_runs_on_after_it(ws):
    term = ws.pty.create(cmd="sleep 600")
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        term.wait(request_timeout=0.5)
    assert time.monotonic() - t0 < 5 and term.running
    term.kill()
    assert term.wait(check=False, request_timeout=30).exit_code == 137


def test_async_terminal(berthd):
    async def main():
        ws = await AsyncWorkspace.connect((await AsyncWorkspace.create(name=unique("apty"))).name)
        seen = bytearray()

        async def on_data(chunk):  # an async callback is awaited
            await asyncio.sleep(0)
            seen.extend(chunk)

        term = await ws.pty.create(cols=90, rows=20, on_data=on_data, cmd="/bin/sh")
        await term.send_stdin("stty size; echo $((6*7))z; exit 2\n")
        r = await term.wait(check=False, request_timeout=30)
        assert r.exit_code == 2
        assert b"20 90" in seen and b"42z" in seen
        await ws.delete()
        await ws.close()

    asyncio.run(main())


def test_a_terminal_ends_with_unavailable_error_within_10_s_when_its_workspace_stops(berthd):
    ws = Workspace.create(name=unique("ptystop"))
    screen = Screen()
    term = ws.pty.create(on_data=screen, cmd="/bin/sh")
    term.send_stdin("echo $((6*7))up\n")
    screen.wait_for("42up")
    other = Workspace.connect(ws.name)
    other.stop(force=True, wait=False)
    stopped_at = time.monotonic()
    with pytest.raises(UnavailableError) as e:
        term.wait(request_timeout=30)
    assert time.monotonic() - stopped_at < 10, "the terminal did not end within 10 s"
    assert "workspace stop" in str(e.value)
    other.close()
    ws.close()
