"""AsyncWorkspace: the same core calls as the sync tests, awaited (the same ops of _core.py,
driven by httpx.AsyncClient), and async callbacks."""

import asyncio
import io
import os

import pytest

from berth import AsyncWorkspace, CommandExitError, NotFoundError
from conftest import unique


def test_async_client_core_calls(berthd, scratch):
    async def main():
        name = unique("async")
        ws = await AsyncWorkspace.create(name=name, labels={"async": name})
        assert ws.state == "running"
        assert [w.id async for w in AsyncWorkspace.list(label={"async": name})] == [ws.id]
        same = await AsyncWorkspace.get_or_create(name)
        assert same.id == ws.id

        seen = []

        async def on_out(s):  # an async callback is awaited
            await asyncio.sleep(0)
            seen.append(s)

        r = await ws.commands.run("echo a; echo b", on_stdout=on_out)
        assert r.stdout == "a\nb\n" and "".join(seen) == "a\nb\n"
        with pytest.raises(CommandExitError) as e:
            await ws.commands.run("exit 7")
        assert e.value.exit_code == 7
        # Two commands at once on one connection pool.
        x, y = await asyncio.gather(ws.commands.run("sleep 1; echo x"),
                                    ws.commands.run("sleep 1; echo y"))
        assert (x.stdout, y.stdout) == ("x\n", "y\n")

        tag = unique("abg")
        h = await ws.commands.run("echo bg", background=True, tag=tag)
        again = await ws.commands.connect(tag)
        assert again.pid == h.pid and (await again.wait()).stdout == "bg\n"

        p = f"{scratch}/async.txt"
        await ws.files.write(p, "async text")
        assert await ws.files.read(p) == "async text"
        assert await ws.files.exists(p) and not await ws.files.exists(p + ".no")
        assert [e.name for e in await ws.files.list(scratch)] == ["async.txt"]
        data = os.urandom(2 * 1024 * 1024)
        await ws.files.upload(f"{scratch}/a.bin", io.BytesIO(data))
        got = b"".join([c async for c in await ws.files.download(f"{scratch}/a.bin")])
        assert got == data
        assert await ws.files.make_dir(f"{scratch}/d")
        await ws.files.rename(p, f"{scratch}/d/moved.txt")
        await ws.files.remove(f"{scratch}/d")
        assert not await ws.files.exists(f"{scratch}/d")

        pv = await ws.previews.create(8000)
        assert pv.link and pv.port == 8000

        assert (await ws.stop()).state == "stopped"
        woken = await AsyncWorkspace.connect(name)
        assert woken.state == "running"
        await ws.set_idle(timeout=1200)
        assert (await ws.info()).idle_timeout == 1200
        await ws.delete(wait=True)
        with pytest.raises(NotFoundError):
            await AsyncWorkspace.connect(name)
        await ws.close()
        await woken.close()

    asyncio.run(main())


def test_generated_async_facade_is_current():
    import subprocess
    import sys
    tool = os.path.join(os.path.dirname(__file__), "..", "tools", "gen_async.py")
    out = subprocess.run([sys.executable, tool, "--check"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    # The same public methods on both sides.
    from berth import aworkspace, workspace
    for a, s in ((aworkspace.AsyncWorkspace, workspace.Workspace),
                 (aworkspace.AsyncCommands, workspace.Commands),
                 (aworkspace.AsyncFiles, workspace.Files),
                 (aworkspace.AsyncPreviews, workspace.Previews),
                 (aworkspace.AsyncCommandHandle, workspace.CommandHandle)):
        assert {m for m in dir(a) if not m.startswith("_")} == \
               {m for m in dir(s) if not m.startswith("_")}, (a, s)
