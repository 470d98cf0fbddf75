#!/usr/bin/env python3
"""Writes src/berth/aworkspace.py (AsyncWorkspace) from src/berth/workspace.py (Workspace):
the async classes are the sync ones with every call awaited, so their names, signatures and
docs cannot drift apart. Run it after editing workspace.py; the tests check the file is
current (`gen_async.py --check`)."""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "src", "berth", "workspace.py")
DST = os.path.join(HERE, "..", "src", "berth", "aworkspace.py")

RULES = [
    (r'^"""Workspace: the blocking client\.', '"""AsyncWorkspace: the asyncio client, generated from workspace.py by\ntools/gen_async.py (do not edit).'),
    (r"from \._sync import Connection", "from ._async import AsyncConnection as Connection"),
    (r"\bIterator\[", "AsyncIterator["),
    (r"from typing import \(IO, Any,", "from typing import (IO, Any, AsyncIterator,"),
    (r"(from typing import .*), Iterator,", r"\1,"),
    (r"\bclass CommandHandle\b", "class AsyncCommandHandle"),
    (r"\bclass Commands\b", "class AsyncCommands"),
    (r"\bclass Files\b", "class AsyncFiles"),
    (r"\bclass Previews\b", "class AsyncPreviews"),
    (r"\bclass PtyHandle\b", "class AsyncPtyHandle"),
    (r"\bclass Pty\b", "class AsyncPty"),
    (r"\bclass WatchHandle\b", "class AsyncWatchHandle"),
    (r"\bclass Network\b", "class AsyncNetwork"),
    (r"\bclass Desktop\b", "class AsyncDesktop"),
    (r"\bclass Checkpoints\b", "class AsyncCheckpoints"),
    (r"\bclass CheckpointScope\b", "class AsyncCheckpointScope"),
    (r"\bclass Templates\b", "class AsyncTemplates"),
    (r"\bCheckpointScope\(self", "AsyncCheckpointScope(self"),
    (r"-> CheckpointScope\b", "-> AsyncCheckpointScope"),
    (r"\bCheckpoints\(self\)", "AsyncCheckpoints(self)"),
    (r"\bself\._ws\.checkpoints\.", "await self._ws.checkpoints."),
    (r"\bPtyHandle\(", "AsyncPtyHandle("),
    (r"-> PtyHandle\b", "-> AsyncPtyHandle"),
    (r"\bWatchHandle\(", "AsyncWatchHandle("),
    (r"-> WatchHandle\b", "-> AsyncWatchHandle"),
    (r"\bPty\(self\)", "AsyncPty(self)"),
    (r"\bNetwork\(self\)", "AsyncNetwork(self)"),
    (r"\bDesktop\(self\)", "AsyncDesktop(self)"),
    (r"\bconn\.join\(", "await conn.join("),
    (r"\bclass Workspace\b", "class AsyncWorkspace"),
    (r"`with ws\.checkpoint\(\)", "`async with ws.checkpoint()"),
    (r"\bCommandHandle\(", "AsyncCommandHandle("),
    (r"-> CommandHandle\b", "-> AsyncCommandHandle"),
    (r"CommandResult, CommandHandle\]", "CommandResult, AsyncCommandHandle]"),
    (r"\bCommands\(self\)", "AsyncCommands(self)"),
    (r"\bFiles\(self\)", "AsyncFiles(self)"),
    (r"\bPreviews\(self\)", "AsyncPreviews(self)"),
    (r'"Workspace"', '"AsyncWorkspace"'),
    (r"Workspace\(id=", "AsyncWorkspace(id="),
    (r"^(\s+)def (?!__init__|_id|id|name|state|running|__repr__|list\(cls|host|cdp_url|checkpoint\()", r"\1async def "),
    (r"return self\.act\(", "return await self.act("),
    (r"\bconn\.run\(", "await conn.run("),
    (r"self\._conn\.run\(", "await self._conn.run("),
    (r"(\s)conn\.close\(\)", r"\1await conn.close()"),
    (r"self\._conn\.close\(\)", "await self._conn.close()"),
    (r"for info in conn\.iterate", "async for info in conn.iterate"),
    (r"async def __enter__\(self\) -> \"AsyncWorkspace\"", 'async def __aenter__(self) -> "AsyncWorkspace"'),
    (r"async def __exit__", "async def __aexit__"),
    (r"async def __enter__\(self\) -> Checkpoint:", "async def __aenter__(self) -> Checkpoint:"),
    (r"        self\.close\(\)", "        await self.close()"),
    (r"return await self\._conn\.run\(self\._conn\.core\.get_host", "return await self._conn.run(self._conn.core.get_host"),
    (r"^(\s+)def list\(cls", r"\1async def list(cls"),
    (r"return self\.(upload|_lifecycle)\(", r"return await self.\1("),
    (r"run by the sync$", "run by the async"),
]


def generate() -> str:
    text = open(SRC).read()
    out = []
    for line in text.splitlines(keepends=True):
        for pat, rep in RULES:
            line = re.sub(pat, rep, line)
        out.append(line)
    return "".join(out)


if __name__ == "__main__":
    text = generate()
    if "--check" in sys.argv:
        current = open(DST).read() if os.path.exists(DST) else ""
        if current != text:
            print("src/berth/aworkspace.py is not what tools/gen_async.py makes: run it")
            sys.exit(1)
        sys.exit(0)
    with open(DST, "w") as f:
        f.write(text)
