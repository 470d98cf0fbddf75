// A real berthd for the SDK's tests: --transport unix, so each workspace's agent is a real
// berth-agent host process and its "guest" is this host (no VM). A stand-in image "base" (a
// small qcow2 made with qemu-img, empty kernel files), a temp data directory, and the operator
// key berthd writes to <data>/admin.key. Binaries from $BERTHD_BIN and $BERTH_AGENT_BIN
// (CTest sets them; tests/integration/CMakeLists.sdk_ts.cmake).
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

export async function waitFor(what, check, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (let pause = 10; ; pause = Math.min(pause * 2, 250)) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await delay(pause);
  }
}

function readTrimmed(file) {
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    return '';
  }
}

// The desktop image's clipboard tool (images/recipes/desktop, /usr/local/lib/berth/clipboard) as
// berthd's own tests fake it (tests/integration/berthd_desktop_test.cc): `get` prints the text,
// `set` stores stdin, exit 3 while there is no display (a file `down` beside it plays that).
const kClipboardTool = `#!/bin/sh
d=$(dirname "$0")
[ -e "$d/down" ] && { echo 'clipboard: the X display :0 is not up' >&2; exit 3; }
case "$1" in get) cat "$d/text" 2>/dev/null ;; set) cat > "$d/text" ;; *) exit 2 ;; esac
`;

/**
 * berthd with `config` (its config file's object). `clipboard`: berthd's desktop.clipboard_tool
 * is the fake above, in <tmp>/clipboard (the answer's `clipboard`), which the host agent may
 * enter and write in whatever user it runs as.
 */
export async function startBerthd({ config, clipboard = false } = {}) {
  const berthdBin = process.env.BERTHD_BIN;
  const agentBin = process.env.BERTH_AGENT_BIN;
  if (!berthdBin || !agentBin) throw new Error('set BERTHD_BIN and BERTH_AGENT_BIN');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-sdk-ts-'));
  const data = path.join(tmp, 'data');
  const image = path.join(data, 'images', 'base', 'v1');
  fs.mkdirSync(image, { recursive: true });
  const made = spawnSync('qemu-img', ['create', '-q', '-f', 'qcow2', path.join(image, 'disk.qcow2'), '1G'],
                         { stdio: 'inherit', timeout: 60_000 });
  if (made.status !== 0) throw new Error('qemu-img create failed (is qemu-utils installed?)');
  for (const f of ['vmlinuz', 'initrd.img']) fs.writeFileSync(path.join(image, f), '');
  fs.writeFileSync(path.join(image, 'image.json'), '{}');
  fs.symlinkSync('v1', path.join(data, 'images', 'base', 'current'));
  const clipboardDir = path.join(tmp, 'clipboard');
  if (clipboard) {
    fs.mkdirSync(clipboardDir);
    fs.writeFileSync(path.join(clipboardDir, 'clipboard'), kClipboardTool, { mode: 0o755 });
    fs.chmodSync(clipboardDir, 0o777);
    fs.chmodSync(tmp, 0o755);
    config = { ...config, desktop: { ...config?.desktop, clipboard_tool: path.join(clipboardDir, 'clipboard') } };
  }
  const args = ['--listen', '127.0.0.1:0', '--data', data, '--libvirt-uri', 'test:///default',
                '--transport', 'unix', '--agent-bin', agentBin, '--agent-user', os.userInfo().username];
  // New disks refused only below 1 GiB free: berthd's default floor (5 GiB and 5 %) is for hosts
  // it owns; a CI machine shares a big disk of which a few percent may be free.
  const file = path.join(tmp, 'config.json');
  fs.writeFileSync(file, JSON.stringify({ min_free_disk: { bytes: 2 ** 30, percent: 0 }, ...config }));
  args.unshift('--config', file);
  const logFile = path.join(tmp, 'berthd.log');
  const log = fs.openSync(logFile, 'w');
  const proc = spawn(berthdBin, args, { stdio: ['ignore', log, log] });
  let exited = null;
  proc.on('exit', (code, signal) => { exited = { code, signal }; });
  const addrFile = path.join(data, 'listen.addr');
  const keyFile = path.join(data, 'admin.key');
  try {
    await waitFor('berthd to write listen.addr and admin.key', () => {
      if (exited) throw new Error(`berthd exited: ${JSON.stringify(exited)}\n${readTrimmed(logFile)}`);
      return readTrimmed(addrFile) && readTrimmed(keyFile);
    }, 60_000);
  } catch (e) {
    // No caller gets a handle to stop it: clean up here.
    if (!exited) proc.kill('SIGKILL');
    fs.rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
  const url = readTrimmed(addrFile);
  const key = readTrimmed(keyFile);

  async function api(method, route, body) {
    const r = await fetch(url + route, {
      method, headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    return { status: r.status, body: text ? JSON.parse(text) : {} };
  }

  async function stop() {
    // Deleting a workspace stops its host agent; berthd leaves agents running otherwise.
    if (!exited) {
      try {
        const list = await api('GET', '/v1/workspaces?limit=1000');
        for (const ws of list.body.workspaces ?? []) await api('DELETE', `/v1/workspaces/${ws.id}`);
        await waitFor('the workspaces to be deleted',
                      async () => ((await api('GET', '/v1/workspaces')).body.workspaces ?? []).length === 0,
                      30_000);
      } catch (e) {
        console.log(`note: cleanup: ${e.message}`);
      }
      proc.kill('SIGTERM');
      try {
        await waitFor('berthd to exit', () => exited, 30_000);
      } catch {
        proc.kill('SIGKILL');
      }
    }
    // Anything still running from this test's directory (a host agent, its children) was
    // started by this test: ended here, by pid.
    for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
      let cmdline = '';
      try {
        cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      } catch {
        continue;
      }
      if (cmdline.includes(tmp) && Number(pid) !== process.pid) {
        try {
          process.kill(Number(pid), 'SIGKILL');
        } catch {}
      }
    }
    fs.rmSync(tmp, { recursive: true, force: true });
    return exited;
  }

  return { url, key, tmp, logFile, api, stop, exited: () => exited, clipboard: clipboard ? clipboardDir : null };
}
