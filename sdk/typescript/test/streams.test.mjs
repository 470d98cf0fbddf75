// ws.pty (GET …/exec/ws), files.watchDir (?watch=1), uploadDir / downloadDir (?archive=tar),
// ws.network, ws.desktop's control, tickets and requests for a person, and the timeline
// (ws.events, ws.followEvents: GET …/events, ?follow=1 as NDJSON), against a real berthd
// (--transport unix: host agents, no VM; test/harness.mjs). Typed commands print computed text ($((6*7))): a
// terminal echoes what is typed, so only the computed value proves the shell ran it.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startBerthd, waitFor } from './harness.mjs';
import {
  BerthError, CommandExitError, InvalidArgumentError, NotFoundError, TimeoutError, UnavailableError, Workspace,
  formatSince,
} from '../dist/index.js';

let berthd;
let conn;
let ws;
let local;  // this test's local directory (the client's side of uploadDir / downloadDir)

before(async () => {
  berthd = await startBerthd();
  conn = { apiUrl: berthd.url, apiKey: berthd.key };
  ws = await Workspace.create({ ...conn, name: 'sdk-streams' });
  local = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-sdk-ts-local-'));
});

after(async () => {
  if (local) fs.rmSync(local, { recursive: true, force: true });
  const exited = await berthd?.stop();
  assert.deepEqual(exited, { code: 0, signal: null }, 'berthd exited cleanly');
});

function screen() {
  const chunks = [];
  const onData = (d) => {
    assert.ok(d instanceof Uint8Array);
    chunks.push(Buffer.from(d));
  };
  const text = () => Buffer.concat(chunks).toString('utf8');
  const seen = (needle) => waitFor(`${JSON.stringify(needle)} on the terminal`, () => text().includes(needle), 20_000);
  return { onData, text, seen };
}

describe('pty', () => {
  test('a terminal has its size, runs what is typed, and ends with its exit code', async () => {
    const s = screen();
    const term = await ws.pty.create({ cols: 100, rows: 30, onData: s.onData, cmd: '/bin/sh', envs: { X: '6' } });
    assert.ok(term.pid > 0 && term.running);
    await term.sendInput('stty size; echo tty=$(tty); echo $(($X*7))x\n');
    await s.seen('42x');
    assert.match(s.text(), /30 100/);
    assert.match(s.text(), /tty=\/dev\/pts\//);
    await term.sendInput(new TextEncoder().encode('exit 3\n'));
    await assert.rejects(term.wait({ requestTimeoutMs: 30_000 }), (e) => e instanceof CommandExitError && e.result.exitCode === 3);
    assert.equal(term.running, false);
  });

  test('resize reaches the process; a bad size is refused', async () => {
    const s = screen();
    const term = await ws.pty.create({ onData: s.onData, cmd: ['/bin/sh'] });
    await term.resize({ cols: 132, rows: 43 });
    await term.sendInput('stty size; echo $((6*7))y\n');
    await s.seen('42y');
    assert.match(s.text(), /43 132/);
    await assert.rejects(term.resize({ cols: 0, rows: 10 }), InvalidArgumentError);
    await assert.rejects(ws.pty.create({ cols: 20000 }), InvalidArgumentError);
    await term.sendInput('exit\n');
    assert.equal((await term.wait({ requestTimeoutMs: 30_000 })).exitCode, 0);
  });

  test('disconnect leaves it running; connect by tag replays its output', async () => {
    const first = screen();
    const term = await ws.pty.create({ onData: first.onData, cmd: '/bin/sh', tag: 'ts-term' });
    assert.equal(term.tag, 'ts-term');
    await term.sendInput('echo $((6*7))before\n');
    await first.seen('42before');
    term.disconnect();
    await assert.rejects(term.wait(), (e) => e instanceof BerthError && /disconnected/.test(e.message));
    assert.ok((await ws.commands.list()).some((p) => p.tag === 'ts-term' && p.status === 'running'));
    const second = screen();
    const again = await ws.pty.connect('ts-term', { onData: second.onData });
    assert.equal(again.pid, term.pid);
    await second.seen('42before');  // the agent's buffer, replayed
    await again.sendInput('echo $((6*7))after; exit 4\n');
    await second.seen('42after');
    assert.equal((await again.wait({ check: false, requestTimeoutMs: 30_000 })).exitCode, 4);
    await assert.rejects(ws.pty.connect('no-such-terminal'), NotFoundError);
  });

  test('kill ends it; wait has a deadline and the terminal runs on after it', async () => {
    const term = await ws.pty.create({ cmd: 'sleep 600' });
    const t0 = Date.now();
    await assert.rejects(term.wait({ requestTimeoutMs: 300 }), TimeoutError);
    assert.ok(Date.now() - t0 < 5000 && term.running);
    assert.equal(await term.kill(), true);
    const r = await term.wait({ check: false, requestTimeoutMs: 30_000 });
    assert.equal(r.exitCode, 137);
    assert.equal(r.signal, 'KILL');
  });

  test('a terminal whose workspace stops ends with UnavailableError within 10 s', async () => {
    const w = await Workspace.create({ ...conn, name: 'sdk-pty-stop' });
    const s = screen();
    const term = await w.pty.create({ onData: s.onData, cmd: '/bin/sh' });
    // Caught at once: the break may come while stop() is still answering.
    const ended = term.wait({ requestTimeoutMs: 30_000 }).then(
      () => assert.fail('the terminal ended without an error'), (e) => e);
    await term.sendInput('echo $((6*7))up\n');
    await s.seen('42up');
    const t0 = Date.now();
    await w.stop({ force: true, wait: false });
    const err = await ended;
    assert.ok(err instanceof UnavailableError && /workspace stop/.test(err.message), `the terminal failed with ${err}`);
    assert.ok(Date.now() - t0 < 10_000, `the terminal ended ${Date.now() - t0} ms after the stop`);
  });
});

describe('files: watchDir', () => {
  test('changes reach onEvent until stop()', async () => {
    const dir = `${berthd.tmp}/watched`;
    await ws.files.makeDir(dir);
    const events = [];
    const exits = [];
    const h = await ws.files.watchDir(dir, (e) => { events.push(`${e.type} ${e.name}${e.isDir ? '/' : ''}`); },
                                      { recursive: true, onExit: (e) => exits.push(e) });
    const seen = (s) => waitFor(s, () => events.includes(s), 20_000);
    await ws.files.write(`${dir}/a.txt`, '1');
    await seen('moved_to a.txt');  // write is atomic: a temporary file renamed into place
    await ws.files.makeDir(`${dir}/sub`);
    await seen('created sub/');
    await ws.commands.run(`sleep 0.2; echo x > ${dir}/sub/b.txt`);
    await seen('created b.txt');
    await ws.files.remove(`${dir}/a.txt`);
    await seen('deleted a.txt');
    await h.stop();
    await h.wait();
    assert.deepEqual(exits, [undefined]);
    const n = events.length;
    await ws.files.write(`${dir}/after.txt`, '2');
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(events.length, n, 'an event arrived after stop()');
    await assert.rejects(ws.files.watchDir(`${dir}/missing`, () => {}), NotFoundError);
  });

  test('a watch whose workspace stops ends with UnavailableError within 10 s', async () => {
    const w = await Workspace.create({ ...conn, name: 'sdk-watch-stop' });
    const exits = [];
    const h = await w.files.watchDir(berthd.tmp, () => {}, { onExit: (e) => exits.push(e) });
    const ended = h.wait().then(() => assert.fail('the watch ended without an error'), (e) => e);
    const t0 = Date.now();
    await w.stop({ force: true, wait: false });
    const err = await ended;
    assert.ok(err instanceof UnavailableError, `the watch failed with ${err}`);
    assert.ok(Date.now() - t0 < 10_000);
    assert.equal(exits.length, 1);
    assert.ok(exits[0] instanceof UnavailableError);
  });
});

function makeTree(root) {
  fs.mkdirSync(`${root}/src/deep/er`, { recursive: true });
  fs.writeFileSync(`${root}/src/main.py`, "print('hi')\n");
  fs.writeFileSync(`${root}/src/deep/er/big.bin`, crypto.randomBytes(3 * 1024 * 1024 + 17));
  fs.writeFileSync(`${root}/run.sh`, '#!/bin/sh\n', { mode: 0o755 });
  fs.writeFileSync(`${root}/empty`, '');
  fs.writeFileSync(`${root}/${'n'.repeat(150)}.txt`, 'long');
  fs.writeFileSync(`${root}/héllo wörld.txt`, 'unicode');
  fs.symlinkSync('src/main.py', `${root}/link`);
}

function tree(root) {
  const out = {};
  const walk = (rel) => {
    for (const name of fs.readdirSync(path.join(root, rel)).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const full = path.join(root, r);
      const st = fs.lstatSync(full);
      if (st.isSymbolicLink()) out[r] = ['link', fs.readlinkSync(full)];
      else if (st.isDirectory()) {
        out[r] = ['dir', st.mode & 0o7777];
        walk(r);
      } else out[r] = ['file', crypto.createHash('sha256').update(fs.readFileSync(full)).digest('hex'), st.mode & 0o7777];
    }
  };
  walk('');
  return out;
}

describe('files: directories as tar', () => {
  test('uploadDir and downloadDir round-trip a tree (long and non-ASCII names, a symlink, modes)', async () => {
    const src = path.join(local, 'src');
    makeTree(src);
    const remote = `${berthd.tmp}/proj`;
    const up = await ws.files.uploadDir(src, remote);
    assert.equal(up.entries, Object.keys(tree(src)).length);
    assert.ok(up.bytes > 3 * 1024 * 1024);
    assert.equal(await ws.files.read(`${remote}/src/main.py`), "print('hi')\n");
    assert.equal((await ws.files.getInfo(`${remote}/link`)).type, 'symlink');
    assert.equal((await ws.files.getInfo(`${remote}/run.sh`)).mode, '0755');
    const back = path.join(local, 'back');
    const down = await ws.files.downloadDir(remote, back);
    assert.deepEqual(tree(back), tree(src));
    assert.equal(down.entries, up.entries);
    assert.equal(down.bytes, up.bytes);
    // Into an existing directory: files are replaced, others stay.
    fs.writeFileSync(`${back}/src/main.py`, 'changed');
    fs.writeFileSync(`${back}/mine.txt`, 'kept');
    await ws.files.downloadDir(remote, back);
    assert.equal(fs.readFileSync(`${back}/src/main.py`, 'utf8'), "print('hi')\n");
    assert.equal(fs.readFileSync(`${back}/mine.txt`, 'utf8'), 'kept');
    await assert.rejects(ws.files.uploadDir(path.join(local, 'nothing-here'), `${remote}/x`), InvalidArgumentError);
    await assert.rejects(ws.files.downloadDir(`${remote}/missing`, path.join(local, 'd')), NotFoundError);
  });

  test('downloadDir never writes through a symlink already on disk', async () => {
    // The archive holds "sneaky/" and "sneaky/evil.txt"; locally "sneaky" is a symlink out of
    // the target. The directory entry replaces the link; nothing lands outside.
    const remote = `${berthd.tmp}/plain`;
    await ws.files.write(`${remote}/sneaky/evil.txt`, 'evil');
    const target = path.join(local, 'target');
    const outside = path.join(local, 'outside');
    fs.mkdirSync(target);
    fs.mkdirSync(outside);
    fs.symlinkSync(outside, path.join(target, 'sneaky'));
    await ws.files.downloadDir(remote, target);
    assert.deepEqual(fs.readdirSync(outside), []);
    assert.ok(fs.lstatSync(path.join(target, 'sneaky')).isDirectory());
    assert.equal(fs.readFileSync(path.join(target, 'sneaky', 'evil.txt'), 'utf8'), 'evil');
  });
});

describe('network and desktop', () => {
  test('network get and set', async () => {
    let st = await ws.network.get();
    assert.equal(st.egress, 'open');
    assert.deepEqual(st.allow, []);
    st = await ws.network.set({ allow: ['github.com', '*.pypi.org', '203.0.113.0/24'] });
    assert.equal(st.egress, 'allowlist');
    assert.deepEqual((await ws.network.get()).allow, ['github.com', '*.pypi.org', '203.0.113.0/24']);
    assert.equal((await ws.network.set({ egress: 'none' })).egress, 'none');
    await assert.rejects(ws.network.set({ egress: 'open', allow: ['github.com'] }), InvalidArgumentError);
    assert.throws(() => ws.network.set({ egress: 'sometimes' }), InvalidArgumentError);
    assert.equal((await ws.network.set({ egress: 'open' })).egress, 'open');
  });

  test('desktop control: take over, release, waitRelease; tickets', async () => {
    assert.equal((await ws.desktop.control()).holder, 'agent');
    const c = await ws.desktop.takeOver({ private: true, reason: 'log in to the bank' });
    assert.equal(c.holder, 'human');
    assert.equal(c.private, true);
    assert.equal(c.reason, 'log in to the bank');
    assert.equal((await ws.desktop.control()).holder, 'human');
    assert.equal((await ws.desktop.release({ note: 'logged in' })).holder, 'agent');
    assert.equal((await ws.desktop.waitRelease({ timeoutMs: 5000 })).holder, 'agent');
    const t = await ws.desktop.ticket('view');
    assert.match(t.ticket, /^dt_[0-9a-f]{64}$/);
    assert.equal(t.mode, 'view');
    assert.ok(t.url.startsWith('ws://') && t.url.includes(t.ticket));
    assert.equal((await ws.desktop.ticket('control')).mode, 'control');
    assert.throws(() => ws.desktop.ticket('drive'), InvalidArgumentError);
  });

  test('desktop requestHuman: nobody takes over within the timeout; withdrawRequest', async () => {
    const start = Date.now();
    const c = await ws.desktop.requestHuman('solve the captcha', { timeoutMs: 1000 });
    assert.ok(Date.now() - start < 10_000);
    assert.equal(c.answered, false);
    assert.ok(c.url);
    assert.equal(c.holder, 'agent');
    assert.equal(c.request ?? null, null);  // withdrawn at the timeout
    const open = await ws.desktop.requestHuman('log in', { timeoutMs: null });
    assert.equal(open.request?.reason, 'log in');
    assert.equal((await ws.desktop.control()).request?.reason, 'log in');
    assert.equal((await ws.desktop.withdrawRequest()).request ?? null, null);
    assert.equal((await ws.desktop.control()).request ?? null, null);
    assert.throws(() => ws.desktop.requestHuman('too long', { timeoutMs: 7_200_000 }), InvalidArgumentError);
  });
});

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: nothing in ${ms} ms`)), ms); }),
  ]);
}

describe('events', () => {
  test('formatSince: a Date as ISO 8601 UTC with Z, whole seconds; numbers as unix seconds', () => {
    assert.equal(formatSince(new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 678))), '2026-01-02T03:04:05Z');
    assert.equal(formatSince(1767322800.9), '1767322800');
    assert.equal(formatSince('2026-01-02T03:04:05Z'), '2026-01-02T03:04:05Z');
  });

  test('a command is recorded with its key; type, actor, since, after and limit filter', async () => {
    const ws = await Workspace.create({ ...conn, name: 'sdk-events' });
    try {
      assert.equal((await ws.commands.run('exit 3', { check: false })).exitCode, 3);
      const execs = await ws.events({ type: 'exec' });
      assert.equal(execs.length, 1);
      const e = execs[0];
      assert.equal(e.type, 'exec');
      assert.equal(e.workspace, ws.id);
      assert.equal(e.data.exit_code, 3);
      assert.equal(e.data.cmd, 'exit 3');
      assert.match(e.actor, /^key_/);
      assert.ok(e.id > 0 && e.at.endsWith('Z'));
      assert.deepEqual((await ws.events({ type: 'created' })).map((x) => x.type), ['created']);
      assert.deepEqual((await ws.events({ type: ['created', 'exec'], actor: 'key' })).map((x) => x.type), ['created', 'exec']);
      assert.equal((await ws.events({ type: 'exec', actor: [e.actor] }))[0].id, e.id);
      assert.deepEqual(await ws.events({ type: 'exec', actor: 'system' }), []);
      assert.deepEqual(await ws.events({ since: new Date(Date.now() + 3_600_000) }), []);
      assert.equal((await ws.events({ type: 'exec', since: Math.floor(Date.now() / 1000) - 3600 })).length, 1);
      const first = await ws.events({ limit: 1 });
      assert.equal(first.length, 1);
      assert.ok((await ws.events({ after: first[0].id }))[0].id > first[0].id);
      await assert.rejects(ws.events({ type: 'a;b' }), InvalidArgumentError);  // berthd's 400
      await assert.rejects(ws.events({ limit: 0 }), InvalidArgumentError);     // the SDK's own check
    } finally {
      await ws.delete();
    }
  });

  test('a follower started before a stop sees stopping then stopped, and closes', async () => {
    const ws = await Workspace.create({ ...conn, name: 'sdk-follow' });
    try {
      const seen = [];
      const follower = (async () => {
        for await (const e of ws.followEvents({ type: 'stopping,stopped' })) {
          seen.push(e);
          if (e.type === 'stopped') break;  // closes the stream
        }
      })();
      await new Promise((r) => setTimeout(r, 500));  // the stream is open before the stop
      await ws.stop();
      await withTimeout(follower, 30_000, 'the follower');
      assert.deepEqual(seen.map((e) => e.type), ['stopping', 'stopped']);
      assert.equal(seen[1].data.state, 'stopped');

      // One that waits for more ends at once on close(): its pending next() is done.
      const live = ws.followEvents({ type: 'stopped' });
      assert.equal((await live.next()).value.type, 'stopped');  // the backlog
      const pending = live.next();
      await withTimeout(live.close(), 5000, 'close()');
      assert.equal((await withTimeout(pending, 5000, 'the pending next()')).done, true);
      assert.equal((await live.next()).done, true);
      // The caller's AbortSignal ends one with its reason.
      const controller = new AbortController();
      const aborted = ws.followEvents({ type: 'created', signal: controller.signal });
      assert.equal((await aborted.next()).value.type, 'created');
      setTimeout(() => controller.abort(), 100);
      await assert.rejects(withTimeout(aborted.next(), 5000, 'the aborted follower'), { name: 'AbortError' });
    } finally {
      await ws.delete();
    }
  });
});
