#!/usr/bin/env python3
"""A cache of an npm app's node_modules as a tarball, outside the clone, so that tests which
need an app's packages in a guest (the preview e2e test, issue 13) do not download them on
every run, and a clean clone in CI reuses them.

    path = node_modules_tarball("tests/e2e/preview/app")   # a tar with node_modules/ at its top

The tarball is keyed by the SHA-256 of package-lock.json, package.json and npm's major version
(a new npm may lay node_modules out differently); it is made by `npm ci --no-audit --no-fund`
in a temporary copy of the app's manifests, bounded by a timeout, written to a temporary file
and renamed into place under a flock, so two runs at once build it once. A second call runs no
npm at all.

The packages with native parts (esbuild's and rollup's platform packages) are picked by npm for
the machine that runs `npm ci`: linux-x64 with glibc here. The guests are Debian 12 x86-64 with
glibc too, so the host's node_modules runs there unchanged; a host of another architecture or
libc would need the guest to run `npm ci` itself.

CLI: npm_cache.py APP_DIR [--cache DIR] [--timeout S] prints the tarball's path on stdout and
what it cost on stderr. Exit 0, or 1 with the reason.
"""

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

DEFAULT_CACHE = os.environ.get("BERTH_NPM_CACHE", "/var/cache/berth/npm")
TARBALL = "node_modules.tar"
# npm ci of a small app takes well under a minute with a warm ~/.npm and a few minutes on a
# slow link; past this the registry is taken as unreachable rather than slow.
DEFAULT_TIMEOUT_S = 600
# Waiting for another run's build of the same key: its npm ci plus the tar.
LOCK_WAIT_S = DEFAULT_TIMEOUT_S + 120
# Words in npm's output that mean the registry could not be reached (as opposed to a bad lock).
NETWORK_ERRORS = ("ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNREFUSED", "ECONNRESET",
                  "ENETUNREACH", "EHOSTUNREACH", "network", "socket hang up")


class NpmCacheError(Exception):
    pass


def log(msg):
    print(f"[npm_cache {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _npm_version_from_files(npm):
    """npm's version read from its own package.json (the npm on PATH is a link to
    .../npm/bin/npm-cli.js, Debian's and NodeSource's alike), or None: so that a cache hit
    starts no node process at all."""
    found = shutil.which(npm)
    if not found:
        return None
    d = os.path.dirname(os.path.realpath(found))
    for _ in range(3):
        try:
            with open(os.path.join(d, "package.json")) as f:
                meta = json.load(f)
            if meta.get("name") == "npm" and isinstance(meta.get("version"), str):
                return meta["version"]
        except (OSError, ValueError):
            pass
        d = os.path.dirname(d)
    return None


def npm_major(npm="npm"):
    """npm's major version as a string ("9", "11")."""
    version = _npm_version_from_files(npm)
    if version and version.split(".")[0].isdigit():
        return version.split(".")[0]
    try:
        out = subprocess.run([npm, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise NpmCacheError(f"cannot run '{npm} --version': {e}") from e
    version = out.stdout.strip()
    if out.returncode != 0 or not version.split(".")[0].isdigit():
        raise NpmCacheError(f"'{npm} --version' answered {out.returncode}: {out.stdout!r} {out.stderr!r}")
    return version.split(".")[0]


def cache_key(app_dir, npm="npm"):
    """The hex SHA-256 that names the app's tarball: its lock, its package.json, npm's major."""
    h = hashlib.sha256()
    for name in ("package-lock.json", "package.json"):
        path = os.path.join(app_dir, name)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise NpmCacheError(f"{path}: {e.strerror} (npm ci needs both manifests)") from e
        # Length-prefixed, so that no two different pairs of files hash alike.
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    h.update(f"npm-major\0{npm_major(npm)}".encode())
    return h.hexdigest()


def _lock(path, wait_s):
    """An exclusive flock on path, waited for at most wait_s: the open file holding it."""
    f = open(path, "a+")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return f
        except BlockingIOError:
            if time.monotonic() >= deadline:
                f.close()
                raise NpmCacheError(f"{path} still locked after {wait_s} s (another npm_cache run hung?)")
            time.sleep(0.5)


def _npm_ci(work, npm, timeout_s):
    cmd = [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error",
           "--fetch-timeout=60000", "--fetch-retries=2"]
    # A session of its own, so that a timeout kills npm's children (install scripts) too: one
    # left holding the pipes would keep communicate() waiting past the timeout.
    proc = subprocess.Popen(cmd, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise NpmCacheError(f"npm ci took over {timeout_s} s (is registry.npmjs.org reachable?)") from e
    if proc.returncode != 0:
        tail = "\n".join(output.strip().splitlines()[-15:])
        hint = " (registry.npmjs.org unreachable?)" if any(w in tail for w in NETWORK_ERRORS) else ""
        raise NpmCacheError(f"npm ci failed with {proc.returncode}{hint}:\n{tail}")
    if not os.path.isdir(os.path.join(work, "node_modules")):
        raise NpmCacheError("npm ci made no node_modules")


def _write_tar(src_dir, dest):
    """node_modules of src_dir as an uncompressed tar at dest, fsynced. Owners are left out (the
    agent does not restore them); tarfile adds directory entries in sorted order."""
    def strip_owner(info):
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with open(dest, "wb") as raw:
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
            tar.add(os.path.join(src_dir, "node_modules"), arcname="node_modules",
                    recursive=True, filter=strip_owner)
        raw.flush()
        os.fsync(raw.fileno())


def node_modules_tarball(app_dir, cache_dir=DEFAULT_CACHE, npm="npm", timeout_s=DEFAULT_TIMEOUT_S):
    """The path of a tarball of app_dir's node_modules (entries under node_modules/), built
    with npm ci the first time and taken from cache_dir afterwards. Blocking; any thread.
    Raises NpmCacheError with the reason (registry unreachable, bad lock, cache not writable)."""
    t0 = time.monotonic()
    app_dir = os.path.abspath(app_dir)
    key = cache_key(app_dir, npm)
    key_dir = os.path.join(cache_dir, key)
    tarball = os.path.join(key_dir, TARBALL)
    if os.path.isfile(tarball):
        log(f"{tarball}: cached, {os.path.getsize(tarball) / 1e6:.1f} MB, {time.monotonic() - t0:.2f} s")
        return tarball
    try:
        os.makedirs(key_dir, exist_ok=True)
    except OSError as e:
        raise NpmCacheError(f"cannot create the cache {key_dir}: {e.strerror} "
                            "(set BERTH_NPM_CACHE or --cache to a writable directory)") from e
    with _lock(os.path.join(key_dir, ".lock"), LOCK_WAIT_S):
        if os.path.isfile(tarball):  # another run built it while this one waited
            log(f"{tarball}: built by another run, {time.monotonic() - t0:.2f} s")
            return tarball
        work = tempfile.mkdtemp(prefix="berth-npm-ci-")
        try:
            # npm ci reads only the manifests (and an .npmrc): the sources are not needed.
            for name in ("package.json", "package-lock.json", ".npmrc"):
                if os.path.exists(os.path.join(app_dir, name)):
                    shutil.copy2(os.path.join(app_dir, name), work)
            log(f"npm ci for {app_dir} (key {key[:12]}…)")
            t_ci = time.monotonic()
            _npm_ci(work, npm, timeout_s)
            ci_s = time.monotonic() - t_ci
            tmp = os.path.join(key_dir, f".{TARBALL}.{os.getpid()}.tmp")
            try:
                _write_tar(work, tmp)
                os.rename(tmp, tarball)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            dir_fd = os.open(key_dir, os.O_RDONLY)
            try:
                os.fsync(dir_fd)  # the rename itself survives a crash
            finally:
                os.close(dir_fd)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    log(f"{tarball}: built, {os.path.getsize(tarball) / 1e6:.1f} MB; npm ci {ci_s:.1f} s, "
        f"{time.monotonic() - t0:.1f} s in all")
    return tarball


def extract_into(tarball, dest_dir, timeout_s=300):
    """Extracts the tarball into dest_dir (which then has node_modules/), with GNU tar: for a
    host-side check of the app. Returns the seconds it took."""
    t0 = time.monotonic()
    try:
        out = subprocess.run(["tar", "-C", dest_dir, "-xf", tarball, "--no-same-owner"],
                             capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        raise NpmCacheError(f"extracting {tarball} took over {timeout_s} s") from e
    if out.returncode != 0:
        raise NpmCacheError(f"tar -xf {tarball} failed: {out.stderr.strip()}")
    return time.monotonic() - t0


def main(argv=None):
    p = argparse.ArgumentParser(description="Print the path of a cached tarball of an app's node_modules.")
    p.add_argument("app_dir", help="a directory with package.json and package-lock.json")
    p.add_argument("--cache", default=DEFAULT_CACHE, help=f"cache directory (default {DEFAULT_CACHE})")
    p.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_S, help="npm ci timeout in seconds")
    args = p.parse_args(argv)
    try:
        print(node_modules_tarball(args.app_dir, args.cache, timeout_s=args.timeout))
    except NpmCacheError as e:
        print(f"npm_cache: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
