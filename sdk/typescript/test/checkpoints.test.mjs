// ws.checkpoints, ws.checkpoint() (a transaction that rolls back unless committed) and
// ws.withCheckpoint() against a real berthd on --transport unix (test/harness.mjs). libvirt's
// test driver cannot snapshot a running domain's disks (berthd answers a 500 naming libvirt),
// so checkpoints are taken of STOPPED workspaces; a restore into a running one (stopped,
// restored, started again) works on it and is what proves the wait. That the disks really come
// back is for the e2e test on a real VM. For the same reason no checkpoint with memory (of a
// running workspace) is taken here: berthd's refusal of one of a stopped workspace shows that
// `memory: true` reaches it, and a stand-in server what the SDK sends and makes of the answer.
// A diff needs a guest that mounts the checkpoint's disks plugged into its VM: libvirt's test
// driver plugs in nothing and the host agent mounts nothing (either is berthd's
// failed_precondition), so berthd's refusals are real here, and the request checkpoints.diff
// sends and what it makes of a full answer are shown against a stand-in.
// Node 20 cannot parse `await using`: one test runs it as
// TypeScript compiles it (ts.transpileModule, target ES2022: TypeScript's own disposal helper),
// the others dispose as it would, `try { ... } finally { await tx[Symbol.asyncDispose](); }`.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, beforeEach, afterEach, test } from 'node:test';
import ts from 'typescript';
import { startBerthd } from './harness.mjs';
import {
  CheckpointTransaction, ConflictError, InvalidArgumentError, NotFoundError, TimeoutError, Workspace,
} from '../dist/index.js';

let berthd;
let conn;
let ws;
let n = 0;

class Boom extends Error {}

before(async () => {
  berthd = await startBerthd();
  conn = { apiUrl: berthd.url, apiKey: berthd.key };
});

after(async () => {
  const exited = await berthd?.stop();
  assert.deepEqual(exited, { code: 0, signal: null }, 'berthd exited cleanly');
});

beforeEach(async () => {
  ws = await Workspace.create({ ...conn, name: `cp-ts-${++n}` });
  await ws.stop();
});

afterEach(async () => {
  await ws?.delete();
});

test('a transaction is AsyncDisposable: Symbol.asyncDispose names its dispose method', async () => {
  assert.equal(typeof Symbol.asyncDispose, 'symbol');
  assert.equal(typeof CheckpointTransaction.prototype[Symbol.asyncDispose], 'function');
});

// `await using` as TypeScript compiles it for Node 18/20 (its __addDisposableResource helper
// looks up Symbol.asyncDispose on the transaction).
const kUsing = `
export async function failing(ws, Boom) {
  await using tx = await ws.checkpoint({ name: 'using-fails' });
  throw new Boom('in the block');
}
export async function committed(ws) {
  await using tx = await ws.checkpoint({ name: 'using-commits' });
  await tx.commit();
  return tx;
}`;

test('await using (compiled by TypeScript) rolls back a block that throws, and not a committed one', async () => {
  const js = ts.transpileModule(kUsing, {
    compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext },
  }).outputText;
  assert.match(js, /__disposeResources/);  // really the downlevel helper, not native syntax
  const using = await import(`data:text/javascript,${encodeURIComponent(js)}`);
  await assert.rejects(using.failing(ws, Boom), (e) => e instanceof Boom && e.message === 'in the block');
  assert.deepEqual((await ws.checkpoints.list()).map((c) => c.kind === 'manual' ? c.name : c.kind),
                   ['before_restore', 'using-fails']);
  const tx = await using.committed(ws);
  assert.equal(tx.restored, null);
  assert.deepEqual((await ws.checkpoints.list()).map((c) => c.kind === 'manual' ? c.name : c.kind),
                   ['using-commits', 'before_restore', 'using-fails']);
});

test('create, list, get and delete round trip on a stopped workspace', async () => {
  assert.deepEqual(await ws.checkpoints.list(), []);
  const cp = await ws.checkpoints.create({ name: 'first' });
  assert.match(cp.id, /^cp_/);
  assert.equal(cp.name, 'first');
  assert.equal(cp.workspace_id, ws.id);
  assert.deepEqual([cp.kind, cp.memory, cp.taken_while, cp.pause_ms], ['manual', false, 'stopped', null]);
  const unnamed = await ws.checkpoints.create();
  assert.equal(unnamed.name, unnamed.id);
  assert.deepEqual((await ws.checkpoints.list()).map((c) => c.id), [unnamed.id, cp.id]);  // newest first
  assert.equal((await ws.checkpoints.get('first')).id, cp.id);
  assert.equal((await ws.checkpoints.get(cp.id)).name, 'first');
  await assert.rejects(ws.checkpoints.create({ name: 'first' }), (e) => e instanceof ConflictError && e.code === 'already_exists');
  assert.equal((await ws.checkpoints.delete('first')).id, cp.id);
  await assert.rejects(ws.checkpoints.get('first'), NotFoundError);
  assert.deepEqual((await ws.checkpoints.list()).map((c) => c.id), [unnamed.id]);
});

test('restore answers the workspace and its before_restore undo checkpoint; undo: false keeps none', async () => {
  const cp = await ws.checkpoints.create({ name: 'base' });
  const r = await ws.checkpoints.restore('base');
  assert.equal(r.workspace.state, 'stopped');
  assert.equal(r.undo.kind, 'before_restore');
  assert.deepEqual((await ws.checkpoints.list()).slice(0, 2).map((c) => c.id), [r.undo.id, cp.id]);
  const count = (await ws.checkpoints.list()).length;
  assert.equal((await ws.checkpoints.restore(cp.id, { undo: false })).undo, null);
  assert.equal((await ws.checkpoints.list()).length, count);
  await assert.rejects(ws.checkpoints.restore('no-such-checkpoint'), NotFoundError);
});

test('restore of a running workspace waits until it runs again (wait: false answers starting)', async () => {
  await ws.checkpoints.create({ name: 'stopped-state' });
  await ws.start();
  const r = await ws.checkpoints.restore('stopped-state');
  assert.equal(r.workspace.state, 'running');
  assert.equal(ws.state, 'running');
  assert.equal(r.undo.kind, 'before_restore');  // taken after berthd stopped it
  const quick = await ws.checkpoints.restore('stopped-state', { wait: false });
  assert.equal(quick.workspace.state, 'starting');
  await ws.waitFor('running');
});

test('a transaction disposed of without commit() rolls back, keeping the failed state as undo', async () => {
  const tx = await ws.checkpoint({ name: 'before-step' });
  await assert.rejects(async () => {
    try {
      throw new Boom('step failed');
    } finally {
      await tx[Symbol.asyncDispose]();  // what `await using` does at the block's end
    }
  }, Boom);
  assert.ok(tx.restored?.undo);
  const kinds = (await ws.checkpoints.list()).map((c) => [c.id, c.kind]);
  assert.deepEqual(kinds, [[tx.restored.undo.id, 'before_restore'], [tx.checkpoint.id, 'manual']]);
});

test('a committed transaction leaves the disks alone; keep: false deletes its checkpoint at commit', async () => {
  const kept = await ws.checkpoint({ name: 'kept' });
  try {
    await kept.commit();
  } finally {
    await kept[Symbol.asyncDispose]();
  }
  assert.equal(kept.restored, null);
  const dropped = await ws.checkpoint({ name: 'dropped', keep: false });
  try {
    assert.equal((await ws.checkpoints.get('dropped')).id, dropped.checkpoint.id);
    await dropped.commit();
  } finally {
    await dropped[Symbol.asyncDispose]();
  }
  assert.deepEqual((await ws.checkpoints.list()).map((c) => c.name), ['kept']);  // no undo: nothing restored
});

test('withCheckpoint restores on a throw and rethrows the same error', async () => {
  const boom = new Boom('original');
  let taken;
  await assert.rejects(ws.withCheckpoint(async (cp) => { taken = cp; throw boom; }, { name: 'wc' }),
                       (e) => e === boom && e.rollbackError === undefined);
  const list = await ws.checkpoints.list();
  assert.deepEqual(list.map((c) => c.kind), ['before_restore', 'manual']);
  assert.equal(list[1].id, taken.id);
});

test('withCheckpoint of a running workspace returns once it runs again after the rollback', async () => {
  await assert.rejects(ws.withCheckpoint(async () => { await ws.start(); throw new Boom(); }), Boom);
  assert.equal(ws.state, 'running');
  assert.equal((await ws.info()).state, 'running');
});

test('withCheckpoint returns the value on success; keep: false deletes the checkpoint', async () => {
  assert.equal(await ws.withCheckpoint(() => 42, { name: 'ok' }), 42);
  assert.equal(await ws.withCheckpoint(async () => 'x', { name: 'gone', keep: false }), 'x');
  assert.deepEqual((await ws.checkpoints.list()).map((c) => c.name), ['ok']);
});

test('withCheckpoint attaches a failed rollback as rollbackError and rethrows the original', async () => {
  const boom = new Boom('original');
  await assert.rejects(ws.withCheckpoint(async (cp) => { await ws.checkpoints.delete(cp.id); throw boom; }),
                       (e) => e === boom && e.rollbackError instanceof NotFoundError);
});

test('memory: true of a stopped workspace is berthd\'s ConflictError (no memory to checkpoint) and takes nothing', async () => {
  await assert.rejects(ws.checkpoints.create({ name: 'warm', memory: true }),
                       (e) => e instanceof ConflictError && e.status === 409 && e.code === 'failed_precondition'
                         && /no memory to checkpoint/.test(e.message));
  await assert.rejects(ws.withCheckpoint(() => assert.fail('the block runs only once the checkpoint is taken'),
                                         { memory: true }), ConflictError);
  await assert.rejects(ws.checkpoint({ name: 'warm-tx', memory: true }), /no memory/);
  assert.deepEqual(await ws.checkpoints.list(), []);
  assert.equal((await ws.checkpoints.create({ memory: false })).memory, false);
});

test('memory: true is sent, and the pause read back, by create and checkpoint() (a stand-in server)', async () => {
  const info = { id: 'ws_0123456789abcdef', name: 'x', state: 'running' };
  const taken = { id: 'cp_0123456789abcdef', workspace_id: info.id, name: 'warm', kind: 'manual', memory: true,
                  parent: null, taken_while: 'running', pause_ms: 312, size_bytes: 1 << 20, created_by: 'key_x',
                  created_at: '2026-12-04T00:00:00Z' };
  const posts = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      res.setHeader('Content-Type', 'application/json');
      if (req.method === 'GET') return res.end(JSON.stringify(info));
      posts.push([req.url, JSON.parse(body)]);
      res.writeHead(201);
      res.end(JSON.stringify(taken));
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  try {
    const w = await Workspace.connect('x', { apiUrl: `http://127.0.0.1:${server.address().port}`, apiKey: 'k' });
    const cp = await w.checkpoints.create({ name: 'warm', memory: true });
    assert.deepEqual([cp.memory, cp.pause_ms, cp.taken_while], [true, 312, 'running']);
    const tx = await w.checkpoint({ memory: true, keep: true });
    assert.equal(tx.checkpoint.pause_ms, 312);
    await tx.commit();
    await w.checkpoints.create();
    const path = `/v1/workspaces/${info.id}/checkpoints`;
    // Without memory the field is not sent: berthd's default, a checkpoint of the disks.
    assert.deepEqual(posts, [[path, { name: 'warm', memory: true }], [path, { memory: true }], [path, {}]]);
  } finally {
    server.closeAllConnections();
    server.close();
  }
});

// A diff as berthd answers it (controller/api/checkpoint_routes.cc, common/protocol/diff.h).
const kDiff = {
  from: 'cp_0123456789abcdef', to: 'current', paths: ['/workspace', '/home/agent'],
  files: {
    added: [{ path: '/workspace/app/x.js', type: 'file', size: 12 },
            { path: '/workspace/node_modules', type: 'dir', size: 4096, entries: 5 }],
    changed: [{ path: '/home/agent/.bashrc', type: 'file', size: 3771 }],
    removed: [{ path: '/workspace/old', type: 'symlink', size: 0 }],
    counts: { added: 7, changed: 1, removed: 1 },
    truncated: true,
  },
  packages: {
    installed: [{ name: 'cowsay', version: '3.03' }],
    changed: [{ name: 'curl', from: '7.88.1', to: '8.5.0' }],
    removed: [{ name: 'vim', version: '2:9.0.1378' }],
  },
  took_ms: 1234,
};

// berthd's refusal of a diff on the unix transport (see the comment at the top).
const kNoDisks = /plugging the checkpoint's disks in: .*not supported|it mounts no disks/;

/** A stand-in berthd: `answer(req)` gives [status, headers, body, delayMs] for each request
 * but GET /v1/workspaces/x (the workspace); `seen` the method and raw target of each. */
async function standIn(answer) {
  const info = { id: 'ws_0123456789abcdef', name: 'x', state: 'running' };
  const seen = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', async () => {
      res.setHeader('Content-Type', 'application/json');
      if (req.url === '/v1/workspaces/x') return res.end(JSON.stringify(info));
      seen.push([req.method, req.url]);
      const [status, headers, body, delayMs] = answer(req);
      if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
      res.writeHead(status, headers);
      res.end(JSON.stringify(body));
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    info, seen, url: `http://127.0.0.1:${server.address().port}`,
    close() { server.closeAllConnections(); server.close(); },
  };
}

/** A request the stand-in saw: its method, decoded path and query. */
function diffRequest([method, target]) {
  const u = new URL(target, 'http://x');
  return [method, decodeURIComponent(u.pathname), Object.fromEntries(u.searchParams)];
}

test('diff sends to and maxEntries, encodes names, and answers berthd\'s whole diff (a stand-in)', async () => {
  const stub = await standIn(() => [200, {}, kDiff, 0]);
  try {
    const w = await Workspace.connect('x', { apiUrl: stub.url, apiKey: 'k' });
    const d = await w.checkpoints.diff('before upgrade/1', { to: 'after #2&x', maxEntries: 50 });
    assert.deepEqual(d, kDiff);
    assert.deepEqual([d.files.counts.added, d.files.truncated, d.files.added[1].entries, d.packages.changed[0].to],
                     [7, true, 5, '8.5.0']);
    await w.checkpoints.diff('cp_0123456789abcdef');
    await w.checkpoints.diff('base', { to: 'cp_fedcba9876543210', maxEntries: 10000 });
    const base = `/v1/workspaces/${stub.info.id}/checkpoints`;
    // The checkpoint's name is one path segment (its / and space encoded), `to` a query value;
    // without `to` the SDK asks for `current`, and max_entries goes only when given.
    assert.ok(stub.seen[0][1].startsWith(`${base}/before%20upgrade%2F1/diff?`), stub.seen[0][1]);
    assert.deepEqual(stub.seen.map(diffRequest), [
      ['GET', `${base}/before upgrade/1/diff`, { to: 'after #2&x', max_entries: '50' }],
      ['GET', `${base}/cp_0123456789abcdef/diff`, { to: 'current' }],
      ['GET', `${base}/base/diff`, { to: 'cp_fedcba9876543210', max_entries: '10000' }],
    ]);
  } finally {
    stub.close();
  }
});

test('diff is sent again after a 503 with Retry-After (a GET), and berthd\'s errors are typed (a stand-in)', async () => {
  const answers = [
    [503, { 'Retry-After': '1' }, { error: { code: 'unavailable', message: 'waking' } }, 0],
    [200, {}, kDiff, 0],
    [404, {}, { error: { code: 'not_found', message: "workspace 'x' has no checkpoint 'nope'" } }, 0],
  ];
  const stub = await standIn(() => answers.shift());
  try {
    const w = await Workspace.connect('x', { apiUrl: stub.url, apiKey: 'k' });
    assert.equal((await w.checkpoints.diff('base')).took_ms, 1234);
    assert.deepEqual(stub.seen.map((s) => s[0]), ['GET', 'GET']);
    await assert.rejects(w.checkpoints.diff('nope'), (e) => e instanceof NotFoundError && e.status === 404
      && /has no checkpoint 'nope'/.test(e.message));
  } finally {
    stub.close();
  }
});

test('diff waits past the connection\'s requestTimeoutMs, as a call that may boot the workspace (a stand-in)', async () => {
  // An ordinary call keeps to the connection's 500 ms; a diff that takes 1.5 s does not fail.
  const stub = await standIn((req) => [200, {}, req.url.includes('/diff') ? kDiff : { id: 'cp_x' }, 1500]);
  try {
    const w = await Workspace.connect('x', { apiUrl: stub.url, apiKey: 'k', requestTimeoutMs: 500 });
    assert.equal((await w.checkpoints.diff('base')).took_ms, 1234);
    await assert.rejects(w.checkpoints.get('base'), TimeoutError);
    const t0 = Date.now();
    await assert.rejects(w.checkpoints.diff('base', { requestTimeoutMs: 500 }), TimeoutError);  // given: it bounds it
    assert.ok(Date.now() - t0 < 1400);
  } finally {
    stub.close();
  }
});

test('diff against berthd: unknown checkpoints, bad arguments, and the unix transport\'s refusal', async () => {
  const cp = await ws.checkpoints.create({ name: 'diff-base' });
  await assert.rejects(ws.checkpoints.diff('no-such-checkpoint'),
                       (e) => e instanceof NotFoundError && e.status === 404 && /no-such-checkpoint/.test(e.message));
  await assert.rejects(ws.checkpoints.diff('diff-base', { to: 'no-such-checkpoint' }), NotFoundError);
  await assert.rejects(ws.checkpoints.diff('current', { to: 'diff-base' }),
                       (e) => e instanceof InvalidArgumentError && e.status === 400);
  await assert.rejects(ws.checkpoints.diff('diff-base', { maxEntries: 0 }),
                       (e) => e instanceof InvalidArgumentError && /max_entries/.test(e.message));
  assert.equal((await ws.info()).state, 'stopped');  // refused before the workspace was woken
  // A real checkpoint: berthd starts the workspace (its host agent) and plugs the checkpoint's
  // disks in, which the test driver does not do; past that, the host agent mounts none.
  await assert.rejects(ws.checkpoints.diff(cp.id, { to: 'current' }),
                       (e) => e instanceof ConflictError && e.status === 409 && e.code === 'failed_precondition'
                         && kNoDisks.test(e.message));
});
