#!/usr/bin/python3
"""A terminal program in a browser tab, for tests/browser/webui_bench.mjs: a WebSocket on
127.0.0.1 that runs COMMAND (`berth shell WS`) under a pseudo-terminal, as ttyd and gotty do,
so that the page (cli_term.html) can draw it with xterm.js.

Bytes-transparent: a binary message from the page is written to the pty as it is; each read
of the pty is sent at once as one binary message (no batching, no compression, TCP_NODELAY).
A text message is JSON: {"type": "resize", "cols": N, "rows": N}; the first one starts
COMMAND at that size (later ones set the pty's size: the kernel signals SIGWINCH).

What the bridge itself costs is measured: for each printable byte the page sends, the time from the
message's arrival to the pty write, from the write until a pty read holds the byte (COMMAND's
round trip, what pty_echo.py times) and from that read until its message is handed to the
socket. A line `take` on stdin prints those records as one JSON line and forgets them.

Prints {"port": N} on stdout once it listens. Serves one connection; when it closes, COMMAND
gets SIGHUP and the bridge exits.

  pty_bridge.py -- COMMAND [ARG...]
"""
import argparse
import asyncio
import fcntl
import json
import os
import pty
import signal
import socket
import struct
import sys
import termios
import time

import websockets


def out(obj):
    sys.stdout.write(json.dumps(obj) + '\n')
    sys.stdout.flush()


def set_size(fd, cols, rows):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack('HHHH', rows, cols, 0, 0))


class Bridge:
    def __init__(self, command):
        self.command = command
        self.records = []     # one per byte from the page: ns in->write, write->read, read->sent
        self.pending = []     # printable bytes written, their echo not yet read: [byte, t_in, t_written]
        self.done = asyncio.Event()
        self.pid = None

    def take(self):
        line = sys.stdin.readline()
        if not line:
            asyncio.get_running_loop().remove_reader(sys.stdin.fileno())
            self.done.set()
            return
        if line.strip() == 'take':
            out({'records': self.records})
            self.records = []

    async def handle(self, ws, path=None):
        loop = asyncio.get_running_loop()
        sock = ws.transport.get_extra_info('socket')
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        first = json.loads(await ws.recv())
        pid, fd = pty.fork()
        if pid == 0:
            try:
                set_size(0, first['cols'], first['rows'])
                os.execvp(self.command[0], self.command)
            finally:
                os._exit(127)
        self.pid = pid
        os.set_blocking(fd, False)
        reads = asyncio.Queue()

        def readable():
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                return
            except OSError:  # EIO: COMMAND and its children have closed the terminal
                data = b''
            t = time.perf_counter_ns()
            if not data:
                loop.remove_reader(fd)
            reads.put_nowait((data, t))

        async def to_page():
            while True:
                data, t_read = await reads.get()
                if not data:
                    break
                await ws.send(data)
                t_sent = time.perf_counter_ns()
                echoed = [p for p in self.pending if p[0] in data]
                for p in echoed:
                    self.records.append({'byte': p[0], 'in_to_write': p[2] - p[1],
                                         'write_to_read': t_read - p[2], 'read_to_sent': t_sent - t_read})
                    self.pending.remove(p)
            await ws.close()

        loop.add_reader(fd, readable)
        sender = asyncio.create_task(to_page())
        try:
            async for m in ws:
                if isinstance(m, bytes):
                    t_in = time.perf_counter_ns()
                    os.write(fd, m)
                    t_written = time.perf_counter_ns()
                    self.pending.extend([b, t_in, t_written] for b in m if 0x20 <= b < 0x7f)
                else:
                    msg = json.loads(m)
                    if msg.get('type') == 'resize':
                        set_size(fd, msg['cols'], msg['rows'])
        except websockets.ConnectionClosed:
            pass
        finally:
            loop.remove_reader(fd)
            sender.cancel()
            try:
                os.kill(pid, signal.SIGHUP)
                await asyncio.sleep(0.5)
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    os.kill(pid, signal.SIGTERM)
                    os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            os.close(fd)
            self.done.set()


async def main():
    p = argparse.ArgumentParser()
    p.add_argument('command', nargs='+')
    a = p.parse_args()
    bridge = Bridge(a.command)
    loop = asyncio.get_running_loop()
    loop.add_reader(sys.stdin.fileno(), bridge.take)
    # compression=None: no permessage-deflate (berthd's terminal socket has none either).
    async with websockets.serve(bridge.handle, '127.0.0.1', 0, compression=None, max_size=None) as server:
        out({'port': server.sockets[0].getsockname()[1]})
        await bridge.done.wait()


if __name__ == '__main__':
    asyncio.run(main())
