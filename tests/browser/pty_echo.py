#!/usr/bin/python3
"""Keystroke-to-echo through a terminal program, for tests/browser/webui_bench.mjs.

Runs COMMAND (`berth shell WS`) under a pseudo-terminal, as a person's terminal emulator
would, and waits for the remote shell's prompt. Then, for each line read on stdin (a string
of printable characters), writes the characters one at a time to the terminal and times,
with perf_counter_ns, from the write until that character comes back; prints the times as
one JSON line ({"ns": [...]}); then erases the shell's line (ctrl+u) and reads until the
terminal is quiet (not timed). EOF on stdin: ctrl+d to the shell, and wait for COMMAND.

The echo must come from the remote shell: the helper checks that the terminal is not
echoing locally (COMMAND has put it in raw mode) before it times anything.

  pty_echo.py [--cols N] [--rows N] -- COMMAND [ARG...]
"""
import argparse
import fcntl
import json
import os
import re
import pty
import select
import signal
import struct
import sys
import termios
import time

kQuietS = 0.3          # the terminal is quiet: nothing for this long
kEchoTimeoutS = 10.0   # one echo; far above any plausible latency, below a hang
kPromptTimeoutS = 60.0


def out(obj):
    sys.stdout.write(json.dumps(obj) + '\n')
    sys.stdout.flush()


def read_some(fd, timeout):
    ready, _, _ = select.select([fd], [], [], timeout)
    if not ready:
        return None
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO: the other side has closed
        return b''


def drain(fd, quiet=kQuietS):
    got = b''
    while True:
        chunk = read_some(fd, quiet)
        if not chunk:
            return got
        got += chunk


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--cols', type=int, default=120)
    p.add_argument('--rows', type=int, default=30)
    p.add_argument('command', nargs='+')
    a = p.parse_args()

    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack('HHHH', a.rows, a.cols, 0, 0))
        try:
            os.execvp(a.command[0], a.command)
        finally:
            os._exit(127)

    try:
        # The prompt: output that ends in '$ ' or '# ' and then stays quiet.
        seen = b''
        deadline = time.monotonic() + kPromptTimeoutS
        while True:
            seen += drain(fd)
            if seen.rstrip(b' ').endswith((b'$', b'#')) and seen.endswith(b' '):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f'pty_echo: no prompt within {kPromptTimeoutS:.0f} s; got {seen[-300:]!r}')
        lflag = termios.tcgetattr(fd)[3]
        if lflag & (termios.ECHO | termios.ICANON):
            raise SystemExit('pty_echo: the terminal still echoes locally (not in raw mode): the times would not be the remote echo')
        prompt = re.sub(r'\x1b\[[0-9;?]*[A-Za-z]', '', seen.decode('utf-8', 'replace').rsplit('\n', 1)[-1])
        out({'ready': True, 'prompt': prompt.strip()})

        for line in sys.stdin:
            chars = line.strip()
            times = []
            for c in chars.encode():
                t0 = time.perf_counter_ns()
                os.write(fd, bytes([c]))
                got = b''
                while c not in got:
                    chunk = read_some(fd, kEchoTimeoutS)
                    if not chunk:
                        raise SystemExit(f'pty_echo: no echo of {chr(c)!r} within {kEchoTimeoutS:.0f} s')
                    got += chunk
                times.append(time.perf_counter_ns() - t0)
            os.write(fd, b'\x15')  # ctrl+u: the shell erases its line
            drain(fd)
            out({'ns': times})

        os.write(fd, b'\x04')  # ctrl+d on an empty line: the shell exits, then COMMAND
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and os.waitpid(pid, os.WNOHANG)[0] == 0:
            read_some(fd, 0.1)
    finally:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)
        except ChildProcessError:  # reaped above
            pass


if __name__ == '__main__':
    main()
