"""ws.commands: run (streamed, exit codes, stdin/env/cwd/timeout), background handles,
reattaching by tag, list, kill, stdin."""

import time

import pytest

from berth import CommandExitError, InvalidArgumentError, NotFoundError, Workspace
from conftest import unique


@pytest.fixture(scope="module")
def ws(berthd):
    w = Workspace.create(name=unique("cmd"))
    yield w
    w.delete()
    w.close()


def test_run_returns_output_and_exit_code(ws):
    r = ws.commands.run("echo out; echo err >&2")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "out\n", "err\n")
    assert r.pid > 0
    argv = ws.commands.run(["printf", "%s|", "a b", "c"])
    assert argv.stdout == "a b|c|"


def test_nonzero_exit_raises_with_the_result_unless_check_false(ws):
    with pytest.raises(CommandExitError) as e:
        ws.commands.run("echo partial; echo why >&2; exit 3")
    assert e.value.exit_code == 3 and e.value.result.stdout == "partial\n"
    assert e.value.stderr == "why\n"
    r = ws.commands.run("exit 5", check=False)
    assert r.exit_code == 5


def test_callbacks_get_output_as_it_comes(ws):
    seen = []
    t0 = time.monotonic()
    stamps = []

    def on_out(s):
        seen.append(("out", s))
        stamps.append(time.monotonic() - t0)

    r = ws.commands.run("echo one; sleep 1; echo two; echo bad >&2",
                        on_stdout=on_out, on_stderr=lambda s: seen.append(("err", s)))
    assert "".join(s for k, s in seen if k == "out") == "one\ntwo\n" == r.stdout
    assert ("err", "bad\n") in seen
    # "one" arrived before the command ended: streamed, not collected at the end.
    assert stamps[0] < 0.9 * stamps[-1]


def test_stdin_env_cwd_user_and_binary_output(ws, scratch):
    assert ws.commands.run("cat", stdin="fed in").stdout == "fed in"
    assert ws.commands.run("cat", stdin="bytes ok".encode()).stdout == "bytes ok"
    with pytest.raises(InvalidArgumentError):
        ws.commands.run("cat", stdin=b"\xff")
    assert ws.commands.run("echo $A-$B", env={"A": "1", "B": "2"}).stdout == "1-2\n"
    assert ws.commands.run("pwd", cwd=scratch).stdout == scratch + "\n"
    # Bytes that are not UTF-8 travel as data_b64 and come back replaced, not as an error.
    assert ws.commands.run(r"printf 'a\377b'").stdout == "a\ufffdb"
    # A multi-byte character split across chunks is not broken.
    assert ws.commands.run("printf 'é%.0s' $(seq 1 5000)").stdout == "é" * 5000


def test_timeout_kills_the_command(ws):
    t0 = time.monotonic()
    r = ws.commands.run("sleep 30", timeout=1, check=False)
    assert r.timed_out and r.exit_code != 0
    assert time.monotonic() - t0 < 15


def test_background_handle_wait_kill_and_reattach_by_tag(ws):
    tag = unique("srv")
    h = ws.commands.run("echo started; sleep 1; echo finished", background=True, tag=tag)
    assert h.pid > 0 and h.tag == tag
    assert any(p.tag == tag for p in ws.commands.list())
    # Another client reattaches by tag and gets the whole output, buffered then live.
    other = Workspace.connect(ws.name)
    again = other.commands.connect(tag)
    assert again.pid == h.pid
    r = again.wait()
    assert r.stdout == "started\nfinished\n" and r.exit_code == 0
    assert not any(p.tag == tag and p.running for p in ws.commands.list())

    sleeper = ws.commands.run("sleep 60", background=True, tag=unique("sleep"))
    assert sleeper.kill()
    r = sleeper.wait(check=False)
    assert r.signal == "KILL" and r.exit_code == 137
    with pytest.raises(CommandExitError):
        ws.commands.connect(sleeper.pid).wait()
    with pytest.raises(NotFoundError):
        ws.commands.connect("no-such-tag")
    assert ws.commands.kill("no-such-tag") is False


def test_background_stdin(ws):
    h = ws.commands.run("cat", background=True, tag=unique("cat"))
    h.send_stdin("line one\n")
    h.send_stdin(b"line two\n", close=True)
    assert h.wait(request_timeout=30).stdout == "line one\nline two\n"


class _CountingRelay:
    """A TCP relay to berthd that counts the connections made through it."""

    def __init__(self, url):
        import socket
        import threading
        host, port = url.rsplit("/", 1)[-1].rsplit(":", 1)
        self.target = (host, int(port))
        self.accepted = 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        import socket
        import threading
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            self.accepted += 1
            upstream = socket.create_connection(self.target)
            for s in (client, upstream):  # the relay adds no delay of its own
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        import socket
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.server.close()


def test_execs_in_a_row_share_one_connection_and_pay_no_nagle_delay(berthd, ws):
    """commands.run reads the stream to its close after `end`, so the keep-alive connection
    goes back to the pool (closing it early cost each exec a new connection), and the sync
    client sets TCP_NODELAY (else each request's body waited 40 ms for a delayed ACK)."""
    relay = _CountingRelay(berthd.url)
    try:
        with Workspace.connect(ws.name, url=relay.url, api_key=berthd.key) as w:
            times = []
            for _ in range(12):
                t0 = time.monotonic()
                assert w.commands.run("true").exit_code == 0
                times.append(time.monotonic() - t0)
        assert relay.accepted == 1, f"{relay.accepted} connections for 13 calls"
        times.sort()
        assert times[len(times) // 2] < 0.035, f"median exec {times[len(times) // 2]:.3f} s"
    finally:
        relay.close()
