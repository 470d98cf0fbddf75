"""E2B's Python quick-start ported to Berth (tests/e2b/): create, run a command, write and read a
file, run a server and fetch it through its host. The port is E2B's file with only the import
and the class name changed, plus the lines marked "Berth:" (checked below); it runs as its own
Python process, configured only by its environment (BERTH_URL, BERTH_API_KEY), as a user's
script would be. Its "guest" is this host (--transport unix): the file it writes lands in
/home/user here, its server listens on this host's port 3000, and the curl it runs in the
workspace reaches the preview through berthd (curl resolves *.localhost to loopback itself)."""

import os
import re
import shutil
import subprocess
import sys

from conftest import HERE

E2B = os.path.join(HERE, "e2b", "quickstart_e2b.py")
PORT = os.path.join(HERE, "e2b", "quickstart_berth.py")


def _code(lines):
    return [line for line in lines if line and not line.startswith("#")]


def test_the_port_differs_from_e2bs_file_only_in_import_class_name_and_marked_lines():
    e2b = open(E2B).read().split("\n")
    port = open(PORT).read().split("\n")
    marked = [line for line in port if "# Berth:" in line]
    assert len(marked) == 4
    unmarked = [line.replace("Workspace", "Sandbox").replace("from berth import",
                                                             "from e2b import")
                for line in _code(port) if "# Berth:" not in line]
    # E2B's lines that the marked ones stand in for.
    replaced = ['python -m http.server 3000', 'url = f"https://{host}"',
                'response = sandbox.commands.run(f"curl {url}")']
    original = [line for line in _code(e2b) if not any(r in line for r in replaced)]
    assert unmarked == original


def test_e2bs_quick_start_runs_on_berth(berthd):
    existed = os.path.exists("/home/user")
    env = dict(os.environ, BERTH_URL=berthd.url, BERTH_API_KEY=berthd.key,
               PYTHONPATH=os.path.join(HERE, "..", "src"))
    try:
        run = subprocess.run([sys.executable, PORT], env=env, capture_output=True, text=True,
                             timeout=180)
        out = run.stdout + run.stderr
        assert run.returncode == 0, out
        assert run.stdout.startswith("Hello from E2B!\n"), out
        assert "\nHello, world!\n" in run.stdout, out
        started = re.search(r"Server started at: (\S+)", run.stdout)
        assert started, out
        assert re.fullmatch(r"http://3000-ws-[0-9a-f]+\.preview\.localhost:\d+",
                            started.group(1)), out
        # python's http.server answers a directory listing of its working directory.
        assert re.search(r"Response from server inside sandbox: <!DOCTYPE HTML>[\s\S]*"
                         r"Directory listing for /", run.stdout), out
        # sandbox.kill() deleted the workspace: the port made one and left none behind.
        name = re.search(r"3000-(ws-[0-9a-f]+)\.", started.group(1)).group(1)
        from berth import Workspace
        left = [w.state for w in Workspace.list() if w.name == name]
        assert left in ([], ["deleting"]), left
    finally:
        if os.path.exists("/home/user/my-file"):
            os.remove("/home/user/my-file")
        if not existed:
            shutil.rmtree("/home/user", ignore_errors=True)
