// The SDK against a real berthd (--transport unix: host agents, no VM; test/harness.mjs):
// every Workspace method, commands (foreground, streamed, background, reattach by tag),
// files, previews, and errors mapped to their types; the transport's deadline, Retry-After
// and retry rules against small local stand-in servers.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import './localhost_dns.mjs';
import { startBerthd, waitFor } from './harness.mjs';
import {
  AuthError, BerthError, CommandExitError, ConflictError, ForbiddenError, InvalidArgumentError,
  NotFoundError, RateLimitError, TimeoutError, UnavailableError, Workspace,
} from '../dist/index.js';

let berthd;
let conn;  // { apiUrl, apiKey }
let ws;

before(async () => {
  berthd = await startBerthd();
  conn = { apiUrl: berthd.url, apiKey: berthd.key };
  ws = await Workspace.create({ ...conn, name: 'sdk-main', labels: { suite: 'sdk' }, env: { FROM_WS: 'yes' } });
});

after(async () => {
  const exited = await berthd?.stop();
  assert.deepEqual(exited, { code: 0, signal: null }, 'berthd exited cleanly');
});

describe('configuration', () => {
  test('BERTH_URL and BERTH_API_KEY are read when no options are given', async () => {
    const saved = { url: process.env.BERTH_URL, key: process.env.BERTH_API_KEY };
    process.env.BERTH_URL = berthd.url;
    process.env.BERTH_API_KEY = berthd.key;
    try {
      const same = await Workspace.connect('sdk-main');
      assert.equal(same.id, ws.id);
    } finally {
      for (const [k, v] of [['BERTH_URL', saved.url], ['BERTH_API_KEY', saved.key]]) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });
});

describe('workspaces', () => {
  test('create waits until running and returns the workspace as berthd has it', async () => {
    assert.equal(ws.state, 'running');
    assert.match(ws.id, /^ws_[0-9a-f]{16}$/);
    assert.equal(ws.name, 'sdk-main');
    const info = await ws.info();
    assert.deepEqual(info.labels, { suite: 'sdk' });
    assert.deepEqual(info.env, { FROM_WS: 'yes' });
  });

  test('create with a screen; berthd refuses a width that is not a multiple of 8', async () => {
    const ws = await Workspace.create({ ...conn, name: 'sdk-screen', screen: '1024x768' });
    try {
      assert.equal((await ws.info()).screen, '1024x768');
    } finally {
      await ws.delete();
    }
    await assert.rejects(Workspace.create({ ...conn, name: 'sdk-screen-bad', screen: '1004x768' }), InvalidArgumentError);
  });

  test('create without wait returns at once; a name is made up when none is given', async () => {
    const quick = await Workspace.create({ ...conn, wait: false, idleTimeout: '10m', idleAction: 'hibernate' });
    assert.match(quick.name, /^ws-[0-9a-f]{8}$/);
    assert.ok(['creating', 'starting', 'running'].includes(quick.state), quick.state);
    assert.equal(quick.lastInfo.idle_timeout, 600);
    assert.equal(quick.lastInfo.idle_action, 'hibernate');
    assert.equal((await quick.waitFor('running')).state, 'running');
    await quick.delete();
    await waitFor('the deleted workspace to be gone',
                  () => quick.info().then(() => false, (e) => e instanceof NotFoundError));
  });

  test('list iterates over every page, by state and label', async () => {
    const extra = [];
    for (let i = 0; i < 3; i++) extra.push(await Workspace.create({ ...conn, name: `sdk-list-${i}`, labels: { suite: 'list' } }));
    const names = [];
    for await (const info of Workspace.list({ ...conn, label: { suite: 'list' }, limit: 2 })) names.push(info.name);
    assert.deepEqual(names.sort(), ['sdk-list-0', 'sdk-list-1', 'sdk-list-2']);
    const running = [];
    for await (const info of Workspace.list({ ...conn, state: 'running', label: 'suite=sdk' })) running.push(info.name);
    assert.deepEqual(running, ['sdk-main']);
    for (const w of extra) await w.delete();
  });

  test('getOrCreate creates once, then returns the same workspace', async () => {
    const first = await Workspace.getOrCreate('sdk-goc', conn);
    const second = await Workspace.getOrCreate('sdk-goc', conn);
    assert.equal(first.id, second.id);
    assert.equal(second.state, 'running');
    await first.delete();
  });

  test('stop, start, hibernate, connect (wakes), setIdle', async () => {
    const w = await Workspace.create({ ...conn, name: 'sdk-life' });
    assert.equal((await w.stop()).state, 'stopped');
    assert.equal((await w.start()).state, 'running');
    assert.equal((await w.hibernate()).state, 'hibernated');
    const woken = await Workspace.connect('sdk-life', conn);
    assert.equal(woken.state, 'running');
    await woken.stop({ force: true });
    // A call to a stopped workspace wakes it (berthd starts it and holds the request).
    assert.equal((await woken.commands.run('echo awake')).stdout, 'awake\n');
    const idle = await w.setIdle({ timeout: '45m', action: 'hibernate' });
    assert.equal(idle.idle_timeout, 2700);
    assert.equal(idle.idle_action, 'hibernate');
    await w.kill();
  });
});

describe('commands', () => {
  test('run returns exit code, stdout and stderr; cwd, envs, stdin, user and the workspace env apply', async () => {
    const r = await ws.commands.run('echo out; echo err >&2; pwd; echo "$A-$FROM_WS"; cat', {
      cwd: '/tmp', envs: { A: 'a' }, stdin: 'from stdin',
    });
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, 'out\n/tmp\na-yes\nfrom stdin');
    assert.equal(r.stderr, 'err\n');
    const argv = await ws.commands.run(['printf', '%s|', 'a b', 'c']);
    assert.equal(argv.stdout, 'a b|c|');
    const me = (await ws.commands.run('id -un')).stdout.trim();
    assert.equal((await ws.commands.run('id -un', { user: me })).stdout.trim(), me);
  });

  test('a non-zero exit throws CommandExitError carrying the result, unless check: false', async () => {
    await assert.rejects(ws.commands.run('echo partial; echo bad >&2; exit 3'), (e) => {
      assert.ok(e instanceof CommandExitError && e instanceof BerthError);
      assert.equal(e.exitCode, 3);
      assert.equal(e.stdout, 'partial\n');
      assert.equal(e.stderr, 'bad\n');
      assert.equal(e.result.exitCode, 3);
      return true;
    });
    const r = await ws.commands.run('exit 4', { check: false });
    assert.equal(r.exitCode, 4);
  });

  test('onStdout and onStderr see output while the command runs', async () => {
    const seen = [];
    let firstAt = 0;
    let secondAt = 0;
    const r = await ws.commands.run('echo one; sleep 1; echo two >&2', {
      onStdout: (d) => { seen.push(`out:${d}`); firstAt ||= Date.now(); },
      onStderr: (d) => { seen.push(`err:${d}`); secondAt ||= Date.now(); },
    });
    assert.deepEqual(seen, ['out:one\n', 'err:two\n']);
    // A second apart in the guest, so apart here too when streamed; collected at the end, they
    // would arrive together. (Relative, not a wall-clock bound: CI's berthd runs under ASan.)
    assert.ok(secondAt - firstAt >= 500, `the lines came ${secondAt - firstAt} ms apart, not live`);
    assert.equal(r.stdout, 'one\n');
  });

  test('timeoutMs: the agent kills the command; the result says so', async () => {
    const t0 = Date.now();
    await assert.rejects(ws.commands.run('sleep 20', { timeoutMs: 500 }), (e) => {
      assert.ok(e instanceof CommandExitError);
      assert.equal(e.timedOut, true);
      assert.match(e.message, /timed out/);
      return true;
    });
    assert.ok(Date.now() - t0 < 5000);
  });

  test('background: a handle with pid, tag, wait and kill; list; reattach by tag', async () => {
    const h = await ws.commands.run('for i in 1 2 3; do echo line$i; sleep 0.2; done', { background: true, tag: 'sdk-bg' });
    assert.ok(h.pid > 0);
    assert.equal(h.tag, 'sdk-bg');
    assert.ok((await ws.commands.list()).some((p) => p.tag === 'sdk-bg'));
    // Another client (a fresh Workspace object) finds it by tag and replays its whole output.
    const other = await Workspace.connect('sdk-main', conn);
    const lines = [];
    const again = await other.commands.connect('sdk-bg', { onStdout: (d) => lines.push(d) });
    assert.equal(again.pid, h.pid);
    const r = await again.wait();
    assert.equal(r.stdout, 'line1\nline2\nline3\n');
    assert.equal(lines.join(''), r.stdout);
    assert.equal((await h.wait()).exitCode, 0);

    const server = await ws.commands.run('sleep 300', { background: true, tag: 'sdk-sleeper' });
    await assert.rejects(server.wait({ requestTimeoutMs: 300 }), TimeoutError);
    assert.equal(await server.kill(), true);
    const ended = await server.wait({ check: false });
    assert.equal(ended.signal, 'KILL');
    assert.equal((await ws.commands.connect('sdk-sleeper')).pid, server.pid);
  });

  test('background stdin: sendStdin reaches the process', async () => {
    const h = await ws.commands.run('read x; echo "got $x"', { background: true });
    await h.sendStdin('hello\n', { close: true });
    assert.equal((await h.wait()).stdout, 'got hello\n');
  });

  test('an AbortSignal cancels a run at once', async () => {
    const controller = new AbortController();
    const t0 = Date.now();
    setTimeout(() => controller.abort(), 300);
    await assert.rejects(ws.commands.run('sleep 30', { signal: controller.signal }), { name: 'AbortError' });
    assert.ok(Date.now() - t0 < 3000);
  });

  test('runs in a row share one keep-alive connection (the stream is read to its close after end)', async () => {
    // A TCP relay to berthd that counts the connections made through it.
    const target = new URL(berthd.url);
    let accepted = 0;
    const relay = net.createServer((client) => {
      accepted++;
      const upstream = net.connect(Number(target.port), target.hostname);
      client.setNoDelay(true);
      upstream.setNoDelay(true);
      client.pipe(upstream).pipe(client);
      const end = () => { client.destroy(); upstream.destroy(); };
      client.on('error', end);
      upstream.on('error', end);
    });
    await new Promise((r) => relay.listen(0, '127.0.0.1', r));
    try {
      const w = await Workspace.connect('sdk-main', { apiUrl: `http://127.0.0.1:${relay.address().port}`, apiKey: berthd.key });
      assert.equal((await w.commands.run('true')).exitCode, 0);
      const before = accepted;
      for (let i = 0; i < 12; i++) assert.equal((await w.commands.run('true')).exitCode, 0);
      // (The first exec after connect() opens a second connection: undici, measured with bare
      // fetch too, does not reuse a client's very first connection here. Not the SDK's.)
      assert.equal(accepted - before, 0, `12 runs opened ${accepted - before} more connections`);
    } finally {
      relay.close();
    }
  });

  test('a stream with nothing for streamIdleTimeoutMs fails with TimeoutError', async () => {
    const w = await Workspace.connect('sdk-main', { ...conn, streamIdleTimeoutMs: 500 });
    await assert.rejects(w.commands.run('sleep 5'), (e) => e instanceof TimeoutError && e.retryable);
  });

  test('a workspace stopped mid-stream ends the stream with an error within 10 s; connect starts it again', async () => {
    const w = await Workspace.create({ ...conn, name: 'sdk-stop-mid' });
    // The stream may break while stop() is still answering: the rejection is
    // caught at once (a later assert.rejects would see an unhandled rejection).
    const running = w.commands.run('sleep 120').then(
      () => assert.fail('the run of sleep 120 ended without an error'),
      (e) => e,
    );
    await waitFor('the sleep to run', async () => (await w.commands.list()).some((p) => p.status === 'running'));
    const t0 = Date.now();
    await w.stop({ force: true, wait: false });
    const err = await running;
    assert.ok(err instanceof UnavailableError && /stream broke/.test(err.message), `the run failed with ${err}`);
    assert.ok(Date.now() - t0 < 10_000, `the stream ended ${Date.now() - t0} ms after the stop`);
    // connect() on one still stopping lets it land, then starts it.
    const again = await Workspace.connect('sdk-stop-mid', conn);
    assert.equal(again.state, 'running');
    await w.delete();
  });
});

describe('files', () => {
  test('write, read (text and bytes), list, exists, rename, makeDir, remove', async () => {
    const dir = `${berthd.tmp}/files`;
    assert.equal(await ws.files.makeDir(dir), true);
    assert.equal(await ws.files.makeDir(dir), false);
    const info = await ws.files.write(`${dir}/a/hello.txt`, 'Hello, world!');
    assert.equal(info.size, 13);
    assert.equal(await ws.files.read(`${dir}/a/hello.txt`), 'Hello, world!');
    await ws.files.write(`${dir}/bin`, new Uint8Array([0, 1, 2, 255]));
    assert.deepEqual([...await ws.files.read(`${dir}/bin`, { format: 'bytes' })], [0, 1, 2, 255]);
    const names = (await ws.files.list(dir)).map((e) => e.name).sort();
    assert.deepEqual(names, ['a', 'bin']);
    assert.equal(await ws.files.exists(`${dir}/a/hello.txt`), true);
    assert.equal(await ws.files.exists(`${dir}/nope`), false);
    await ws.files.rename(`${dir}/a/hello.txt`, `${dir}/moved.txt`);
    assert.equal(await ws.files.exists(`${dir}/a/hello.txt`), false);
    assert.equal(await ws.files.read(`${dir}/moved.txt`), 'Hello, world!');
    await ws.files.remove(`${dir}/a`);
    await ws.files.remove(`${dir}/moved.txt`);
    assert.deepEqual((await ws.files.list(dir)).map((e) => e.name), ['bin']);
    const chunks = [];
    for await (const c of await ws.files.download(`${dir}/bin`)) chunks.push(...c);
    assert.deepEqual(chunks, [0, 1, 2, 255]);
    await assert.rejects(ws.files.read('relative/path'), InvalidArgumentError);
  });
});

describe('uploads (node:http; a file read by the SDK itself)', () => {
  test('a file stream (whole, a start/end range), a FIFO, a stream already read from, an iterable, a Blob', async () => {
    const dir = `${berthd.tmp}/uploads`;
    const local = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-sdk-ts-up-'));
    try {
      // 3.5 MiB: more pieces than the pool's four buffers, the last one short.
      const data = crypto.randomBytes(3.5 * (1 << 20));
      const src = path.join(local, 'src.bin');
      fs.writeFileSync(src, data);
      const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');
      const info = await ws.files.upload(`${dir}/whole.bin`, fs.createReadStream(src));
      assert.equal(info.size, data.length);
      assert.equal(sha(fs.readFileSync(`${dir}/whole.bin`)), sha(data));
      await ws.files.upload(`${dir}/range.bin`, fs.createReadStream(src, { start: 1000, end: 2_500_000 }));
      assert.ok(fs.readFileSync(`${dir}/range.bin`).equals(data.subarray(1000, 2_500_001)));
      fs.writeFileSync(path.join(local, 'empty'), '');
      await ws.files.upload(`${dir}/empty.bin`, fs.createReadStream(path.join(local, 'empty')));
      assert.equal(fs.statSync(`${dir}/empty.bin`).size, 0);
      // A FIFO has no size: streamed as it comes.
      const fifo = path.join(local, 'fifo');
      spawnSync('mkfifo', [fifo]);
      const writer = fs.createWriteStream(fifo);
      const up = ws.files.upload(`${dir}/fifo.bin`, fs.createReadStream(fifo));
      writer.end(data.subarray(0, 100_000));
      assert.equal((await up).size, 100_000);
      // A stream someone already read from goes on from where it is.
      const partly = fs.createReadStream(src, { highWaterMark: 1024 });
      const first = await new Promise((resolve) => partly.once('readable', () => resolve(partly.read(1024))));
      assert.equal(first.length, 1024);
      await ws.files.upload(`${dir}/rest.bin`, partly);
      assert.ok(fs.readFileSync(`${dir}/rest.bin`).equals(data.subarray(1024)));
      async function* pieces() {
        yield 'text, ';
        yield data.subarray(0, 10);
      }
      assert.equal((await ws.files.upload(`${dir}/iter.bin`, pieces())).size, 16);
      assert.equal((await ws.files.write(`${dir}/blob.txt`, new Blob(['blob']))).size, 4);
      // berthd's answer to a bad request is its typed error, before or during the body.
      await assert.rejects(ws.files.upload(`${dir}/whole.bin/under-a-file`, fs.createReadStream(src)),
                           (e) => e instanceof BerthError && e.status >= 400 && e.status < 500);
      const deadline = ws.files.upload(`${dir}/slow.bin`, (async function* () {
        yield data.subarray(0, 10);
        await new Promise((r) => setTimeout(r, 2000));
      })(), { requestTimeoutMs: 300 });
      await assert.rejects(deadline, TimeoutError);
    } finally {
      fs.rmSync(local, { recursive: true, force: true });
    }
  });
});

describe('previews', () => {
  test('create (private and public), list, revoke; getHost is the preview host; ports, waitForPort', async () => {
    const app = http.createServer((req, res) => res.end(`app saw ${req.headers.host}`));
    await new Promise((r) => app.listen(0, '127.0.0.1', r));
    const port = app.address().port;
    try {
      // The "guest" is this host: the app's port is the workspace's.
      assert.equal(await ws.waitForPort(port, { timeoutMs: 10_000 }), port);
      assert.ok((await ws.ports()).some((p) => p.port === port));
      await assert.rejects(ws.waitForPort(1, { timeoutMs: 300 }), TimeoutError);
      const priv = await ws.previews.create(port, { expiresIn: '2h' });
      assert.equal(priv.public, false);
      assert.match(priv.token, /^bpt_/);
      assert.equal(new URL(priv.url).host, ws.getHost(port));
      // The server on that port, through berthd's preview proxy by its host.
      const denied = await fetch(`http://${ws.getHost(port)}/`, { redirect: 'manual' });
      assert.equal(denied.status, 401);
      const viaToken = await fetch(`http://${ws.getHost(port)}/`, { headers: { 'X-Berth-Preview-Token': priv.token } });
      assert.equal(await viaToken.text(), `app saw localhost:${port}`);
      const pub = await ws.previews.create(port, { public: true, expiresIn: 3600 });
      const open = await fetch(`http://${ws.getHost(port)}/`, { headers: { 'X-Berth-Skip-Interstitial': '1' } });
      assert.equal(await open.text(), `app saw localhost:${port}`);
      assert.equal((await ws.previews.list()).length, 2);
      assert.equal((await ws.previews.revoke(pub.id)).status, 'revoked');
    } finally {
      app.close();
    }
  });
});

describe('errors', () => {
  test('404, 401, 403, 409 and 400 map to their types with code, status and retryable', async () => {
    await assert.rejects(Workspace.connect('no-such-workspace', conn), (e) => {
      assert.ok(e instanceof NotFoundError && e instanceof BerthError);
      assert.equal(e.status, 404);
      assert.equal(e.code, 'not_found');
      assert.equal(e.retryable, false);
      return true;
    });
    await assert.rejects(Workspace.connect('sdk-main', { ...conn, apiKey: 'bk_wrong' }),
                         (e) => e instanceof AuthError && e.status === 401 && e.code === 'unauthenticated');
    await assert.rejects(Workspace.create({ ...conn, name: 'sdk-main' }),
                         (e) => e instanceof ConflictError && e.status === 409 && e.code === 'already_exists');
    await assert.rejects(Workspace.create({ ...conn, name: 'sdk-bad', idleAction: 'explode' }),
                         (e) => e instanceof InvalidArgumentError && e.status === 400 && e.code === 'invalid_argument');
    // A read-scope key: GETs pass, a create is 403.
    const made = await berthd.api('POST', '/v1/keys', { scope: 'read', name: 'sdk-read' });
    assert.equal(made.status, 201);
    const reader = { ...conn, apiKey: made.body.key };
    assert.equal((await Workspace.connect('sdk-main', reader)).id, ws.id);
    await assert.rejects(Workspace.create({ ...reader, name: 'sdk-denied' }),
                         (e) => e instanceof ForbiddenError && e.status === 403 && e.code === 'permission_denied');
    await assert.rejects(ws.files.read(`${berthd.tmp}/missing`), NotFoundError);
    await assert.rejects(ws.commands.connect('no-such-tag'), NotFoundError);
  });

  test('no berthd at the address: UnavailableError (retryable), never a raw TypeError', async () => {
    const closed = http.createServer();
    await new Promise((r) => closed.listen(0, '127.0.0.1', r));
    const port = closed.address().port;
    await new Promise((r) => closed.close(r));
    await assert.rejects(Workspace.connect('x', { apiUrl: `http://127.0.0.1:${port}`, apiKey: 'k', requestTimeoutMs: 1500 }),
                         (e) => e instanceof UnavailableError && e.retryable && e.cause !== undefined);
  });
});

// A stand-in server for the transport's rules; `handler(req, res, n)` answers request n.
async function standIn(handler) {
  let n = 0;
  const seen = [];
  const server = http.createServer((req, res) => {
    seen.push({ method: req.method, url: req.url, key: req.headers['idempotency-key'] });
    handler(req, res, n++);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}`, seen, close: () => server.closeAllConnections() || server.close() };
}

const kWorkspace = { id: 'ws_0123456789abcdef', name: 'x', state: 'running' };

describe('transport', () => {
  test('a 503 with Retry-After is waited out and sent again within the deadline', async () => {
    const s = await standIn((req, res, n) => {
      if (n === 0) {
        res.writeHead(503, { 'Retry-After': '1', 'Content-Type': 'application/json' });
        res.end('{"error":{"code":"unavailable","message":"waking"}}');
      } else {
        res.end(JSON.stringify(kWorkspace));
      }
    });
    try {
      const t0 = Date.now();
      const w = await Workspace.connect('x', { apiUrl: s.url, apiKey: 'k' });
      assert.equal(w.id, kWorkspace.id);
      assert.equal(s.seen.length, 2);
      assert.ok(Date.now() - t0 >= 900, 'Retry-After was not waited out');
    } finally {
      s.close();
    }
  });

  test('a Retry-After longer than the deadline leaves: the 503 becomes UnavailableError at once', async () => {
    const s = await standIn((req, res) => {
      res.writeHead(503, { 'Retry-After': '30', 'Content-Type': 'application/json' });
      res.end('{"error":{"code":"unavailable","message":"waking"}}');
    });
    try {
      const t0 = Date.now();
      await assert.rejects(Workspace.connect('x', { apiUrl: s.url, apiKey: 'k', requestTimeoutMs: 2000 }),
                           (e) => e instanceof UnavailableError && e.status === 503);
      assert.ok(Date.now() - t0 < 4000);
    } finally {
      s.close();
    }
  });

  test('a 429 whose Retry-After outlasts the deadline: RateLimitError, retryable, with details', async () => {
    const s = await standIn((req, res) => {
      res.writeHead(429, { 'Retry-After': '5', 'Content-Type': 'application/json' });
      res.end('{"error":{"code":"too_many_connections","message":"this key has 256 open connections","details":{"limit":256}}}');
    });
    try {
      await assert.rejects(Workspace.connect('x', { apiUrl: s.url, apiKey: 'k', requestTimeoutMs: 1000 }), (e) => {
        assert.ok(e instanceof RateLimitError);
        assert.equal(e.code, 'too_many_connections');
        assert.equal(e.retryable, true);
        assert.deepEqual(e.details, { limit: 256 });
        return true;
      });
      assert.equal(s.seen.length, 1);
    } finally {
      s.close();
    }
  });

  test('no answer within requestTimeoutMs: TimeoutError', async () => {
    const s = await standIn(() => {});  // never answers
    try {
      const t0 = Date.now();
      await assert.rejects(Workspace.connect('x', { apiUrl: s.url, apiKey: 'k', requestTimeoutMs: 700 }),
                           (e) => e instanceof TimeoutError && e.code === 'deadline_exceeded');
      assert.ok(Date.now() - t0 < 3000);
    } finally {
      s.close();
    }
  });

  test('a create whose answer is lost is sent again with the same Idempotency-Key', async () => {
    const s = await standIn((req, res, n) => {
      if (n === 0) {
        req.socket.destroy();  // the answer is lost
        return;
      }
      res.writeHead(req.url.endsWith('/wait') ? 200 : 201, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(kWorkspace));
    });
    try {
      const w = await Workspace.create({ apiUrl: s.url, apiKey: 'k', name: 'x' });
      assert.equal(w.id, kWorkspace.id);
      const creates = s.seen.filter((r) => r.url === '/v1/workspaces');
      assert.equal(creates.length, 2);
      assert.ok(creates[0].key && creates[0].key === creates[1].key, 'the retry carried the same key');
    } finally {
      s.close();
    }
  });

  test('a non-idempotent call (exec) whose answer is lost is not sent again', async () => {
    const s = await standIn((req, res, n) => {
      if (n === 0) {
        res.end(JSON.stringify(kWorkspace));
        return;
      }
      req.socket.destroy();
    });
    try {
      const w = await Workspace.connect('x', { apiUrl: s.url, apiKey: 'k' });
      await assert.rejects(w.commands.run('echo hi'), UnavailableError);
      assert.equal(s.seen.filter((r) => r.url.endsWith('/exec')).length, 1);
    } finally {
      s.close();
    }
  });
});
