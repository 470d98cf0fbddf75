#!/usr/bin/env python3
"""tests/support/npm_cache.py against a fake npm (a shell script that counts its runs): no
registry, no node, well under a second of work. Proves that the tarball is built once and then
served with no npm at all, that two runs at once build it once, that the key follows the lock
and npm's major version, that a registry error and a timeout are clear errors that leave no
tarball behind, and that the tarball holds node_modules/ with its symlinks."""

import os
import subprocess
import sys
import tarfile
import tempfile
import threading

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import npm_cache  # noqa: E402

FAKE_NPM = """#!/bin/sh
# A stand-in for npm: --version answers $FAKE_NPM_VERSION; ci records its run and makes a
# node_modules like a real one (a package, a .bin symlink) after $FAKE_NPM_DELAY seconds.
if [ "$1" = "--version" ]; then echo "${FAKE_NPM_VERSION:-9.2.0}"; exit 0; fi
[ "$1" = ci ] || exit 64
echo run >>"$FAKE_NPM_RUNS"
sleep "${FAKE_NPM_DELAY:-0}"
if [ -n "$FAKE_NPM_FAIL" ]; then
  echo "npm error code ENOTFOUND" >&2
  echo "npm error network request to https://registry.npmjs.org/vite failed" >&2
  exit 1
fi
mkdir -p node_modules/pkg/bin node_modules/.bin
echo 'console.log(1)' >node_modules/pkg/bin/pkg.js
ln -s ../pkg/bin/pkg.js node_modules/.bin/pkg
"""

failures = []


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def runs(env):
    try:
        with open(env["FAKE_NPM_RUNS"]) as f:
            return len(f.read().split())
    except FileNotFoundError:
        return 0


def main():
    root = tempfile.mkdtemp(prefix="npm-cache-test-")
    npm = os.path.join(root, "npm")
    with open(npm, "w") as f:
        f.write(FAKE_NPM)
    os.chmod(npm, 0o755)
    app = os.path.join(root, "app")
    os.mkdir(app)
    for name, text in (("package.json", '{"name": "a"}\n'), ("package-lock.json", '{"lockfileVersion": 3}\n')):
        with open(os.path.join(app, name), "w") as f:
            f.write(text)
    cache = os.path.join(root, "cache")
    os.environ.update(FAKE_NPM_RUNS=os.path.join(root, "runs"), FAKE_NPM_VERSION="9.2.0")
    env = os.environ

    # Built once; the second call runs no npm (not even --version: the fake is not npm's own
    # package, so the version is asked for, which does not count as a run of ci).
    first = npm_cache.node_modules_tarball(app, cache, npm=npm)
    expect(runs(env) == 1, "the first call runs npm ci once")
    second = npm_cache.node_modules_tarball(app, cache, npm=npm)
    expect(second == first and runs(env) == 1, "the second call returns the same tarball without npm ci")
    with tarfile.open(first) as tar:
        members = {m.name: m for m in tar.getmembers()}
    expect("node_modules/pkg/bin/pkg.js" in members, "the tarball holds node_modules/ at its top")
    link = members.get("node_modules/.bin/pkg")
    expect(link is not None and link.issym() and link.linkname == "../pkg/bin/pkg.js",
           "the .bin symlink stays a relative symlink")
    expect(all(m.uid == 0 and m.uname == "" for m in members.values()), "no owners in the tarball")
    expect(not [n for n in os.listdir(os.path.dirname(first)) if n.endswith(".tmp")], "no temporary file left")

    # Another lock, another npm major: other keys.
    key = npm_cache.cache_key(app, npm)
    with open(os.path.join(app, "package-lock.json"), "a") as f:
        f.write(" ")
    expect(npm_cache.cache_key(app, npm) != key, "a changed package-lock.json changes the key")
    os.environ["FAKE_NPM_VERSION"] = "10.1.0"
    key10 = npm_cache.cache_key(app, npm)
    os.environ["FAKE_NPM_VERSION"] = "10.9.9"
    expect(npm_cache.cache_key(app, npm) == key10, "npm's minor version does not change the key")
    os.environ["FAKE_NPM_VERSION"] = "9.2.0"

    # Two runs at once for a new key: one builds, the other waits for it and takes its tarball.
    os.environ["FAKE_NPM_DELAY"] = "1"
    before = runs(env)
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        subprocess.run([sys.executable, npm_cache.__file__, app, "--cache", cache],
                       capture_output=True, text=True, env={**env, "PATH": f"{root}:{env['PATH']}"})))
        for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    os.environ["FAKE_NPM_DELAY"] = "0"
    expect(len(results) == 2 and all(r.returncode == 0 for r in results), "both concurrent CLI runs succeed")
    expect(len({r.stdout for r in results}) == 1 and results[0].stdout.strip().endswith("node_modules.tar"),
           "both print the same tarball path")
    expect(runs(env) == before + 1, "two runs at once build the tarball once")

    # A registry error: a clear message, no tarball.
    with open(os.path.join(app, "package-lock.json"), "a") as f:
        f.write(" ")
    os.environ["FAKE_NPM_FAIL"] = "1"
    try:
        npm_cache.node_modules_tarball(app, cache, npm=npm)
        expect(False, "a failing npm ci raises")
    except npm_cache.NpmCacheError as e:
        expect("unreachable" in str(e) and "ENOTFOUND" in str(e), f"a registry error says so: {e}")
    del os.environ["FAKE_NPM_FAIL"]
    key_dir = os.path.join(cache, npm_cache.cache_key(app, npm))
    expect(not os.path.exists(os.path.join(key_dir, npm_cache.TARBALL)), "a failed build leaves no tarball")

    # A hung npm: the timeout ends it with a clear error.
    os.environ["FAKE_NPM_DELAY"] = "30"
    try:
        npm_cache.node_modules_tarball(app, cache, npm=npm, timeout_s=1)
        expect(False, "a hung npm ci raises")
    except npm_cache.NpmCacheError as e:
        expect("took over 1 s" in str(e), f"a timeout says so: {e}")
    os.environ["FAKE_NPM_DELAY"] = "0"

    # The real npm's version is read from its package.json, without starting node.
    version = npm_cache._npm_version_from_files("npm")
    expect(version is None or version.split(".")[0].isdigit(), f"npm's own version from its files: {version}")

    subprocess.run(["rm", "-rf", root], check=False)
    print(f"{'FAIL' if failures else 'PASS'}: npm_cache, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
