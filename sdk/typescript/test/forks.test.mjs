// Forks and templates: ws.checkpoints.fork (POST …/checkpoints/{cp}/fork), ws.fork() and
// Workspace.create({ from }) (POST /v1/workspaces {from}), Workspace.create({ template }) and
// Templates (/v1/templates), against a real berthd on --transport unix (test/harness.mjs), where
// a fork's "guest" is a host agent of its own. libvirt's test driver takes no checkpoint of a
// running workspace (see checkpoints.test.mjs), so forks here are of STOPPED workspaces'
// checkpoints and no checkpoint has memory: berthd's refusal of a template of one without
// memory ("has no memory") is what reaches it, and a stand-in server shows what the SDK sends
// for a template and makes of berthd's answers. That a fork resumes its source's memory, and a
// template's workspace its programs, is the e2e tests' to show on a real VM.
//
// Templates built from a script: berthd makes the build's workspace (a host agent here) and runs
// the script through its agent, so a script that fails, its log and berthd's refusals are real;
// a build that gets through ends at the checkpoint of the workspace's memory, which the test
// driver cannot take, so the wait for a `ready` build is shown against the stand-in.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { startBerthd, waitFor } from './harness.mjs';
import {
  ConflictError, InvalidArgumentError, NotFoundError, TemplateBuildError, Templates, TimeoutError, UnavailableError,
  Workspace,
} from '../dist/index.js';

let berthd;
let conn;
let src;
let base;
let made;
let n = 0;

before(async () => {
  berthd = await startBerthd();
  conn = { apiUrl: berthd.url, apiKey: berthd.key };
});

after(async () => {
  const exited = await berthd?.stop();
  assert.deepEqual(exited, { code: 0, signal: null }, 'berthd exited cleanly');
});

describe('against berthd', () => {
  // A stopped workspace with a checkpoint "base" of its disks; forks made from it go in `made`.
  beforeEach(async () => {
    src = await Workspace.create({ ...conn, name: `fork-src-${++n}` });
    await src.stop();
    base = await src.checkpoints.create({ name: 'base' });
    made = [];
  });

  // Forks first: their source cannot be deleted while they exist.
  async function gone(ws) {
    try {
      await ws.delete();
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
    }
    await waitFor(`${ws.name} to be deleted`, () => ws.info().then(() => false, (e) => {
      if (e instanceof NotFoundError) return true;
      throw e;
    }), 30_000);
  }

  afterEach(async () => {
    for (const w of made) await gone(w);
    await gone(src);
  });

  test('checkpoints.fork makes count running forks named <name>-i on the checkpoint, with their labels', async () => {
    const forks = await src.checkpoints.fork('base', { name: `twig-${n}`, count: 2, labels: { role: 'fork' } });
    made.push(...forks);
    assert.deepEqual(forks.map((f) => f.name), [`twig-${n}-1`, `twig-${n}-2`]);
    assert.ok(forks.every((f) => f instanceof Workspace));
    assert.equal(new Set([src.id, ...forks.map((f) => f.id)]).size, 3);  // new workspaces, not the source
    assert.deepEqual(forks.map((f) => f.state), ['running', 'running']);  // waited for by default
    for (const f of forks) {
      const info = await f.info();
      assert.deepEqual([info.state, info.forked_from, info.labels], ['running', base.id, { role: 'fork' }]);
      assert.equal(info.image, src.lastInfo.image);
      assert.equal((await f.commands.run('echo ok')).stdout, 'ok\n');  // its own agent answers
    }
  });

  test('a fork keeps its checkpoint and its source from being deleted until it is gone', async () => {
    const [fork] = await src.checkpoints.fork('base', { name: `leaf-${n}`, wait: false });
    made.push(fork);
    assert.equal(fork.state, 'creating');  // wait: false: as berthd answered
    await assert.rejects(src.checkpoints.delete('base'),
                         (e) => e instanceof ConflictError && e.status === 409 && e.message.includes(fork.name));
    await assert.rejects(src.delete(), ConflictError);
    await gone(fork);
    assert.equal((await src.checkpoints.delete('base')).id, base.id);
  });

  test('checkpoints.fork errors are typed (404 unknown checkpoint, 400 count, 409 name taken) and make nothing', async () => {
    const ids = async () => { const s = []; for await (const w of Workspace.list(conn)) s.push(w.id); return s.sort(); };
    const before = await ids();
    await assert.rejects(src.checkpoints.fork('no-such-checkpoint', { name: `x-${n}` }),
                         (e) => e instanceof NotFoundError && e.status === 404 && e.code === 'not_found');
    await assert.rejects(src.checkpoints.fork('base', { name: `many-${n}`, count: 17 }),
                         (e) => e instanceof InvalidArgumentError && /'count'/.test(e.message));
    const taken = await Workspace.create({ ...conn, name: `taken-${n}`, wait: false });
    made.push(taken);
    await assert.rejects(src.checkpoints.fork('base', { name: taken.name }),
                         (e) => e instanceof ConflictError && e.status === 409 && e.code === 'already_exists');
    assert.deepEqual(await ids(), [...before, taken.id].sort());
  });

  test('ws.fork() without a checkpoint forks one taken of it now', async () => {
    const fork = await src.fork({ name: `now-${n}`, labels: { k: 'v' } });
    made.push(fork);
    assert.equal(fork.state, 'running');
    const info = await fork.info();
    assert.deepEqual(info.labels, { k: 'v' });
    const taken = (await src.checkpoints.list()).find((c) => c.id === info.forked_from);
    assert.ok(taken, 'forked_from is a checkpoint of the source');
    assert.notEqual(taken.name, 'base');
    assert.equal(taken.taken_while, 'stopped');
  });

  test('ws.fork({ checkpoint }) and Workspace.create({ from }) fork the checkpoint they name', async () => {
    const a = await src.fork({ name: `a-${n}`, checkpoint: 'base' });
    made.push(a);
    const b = await Workspace.create({ ...conn, name: `b-${n}`, from: { workspace: src.name, checkpoint: base.id } });
    made.push(b);
    const c = await Workspace.create({ ...conn, name: `c-${n}`, from: { workspace: src, checkpoint: 'base' }, wait: false });
    made.push(c);
    assert.equal(c.state, 'creating');
    for (const w of [a, b, c]) assert.equal((await w.info()).forked_from, base.id);
    assert.equal((await src.checkpoints.list()).length, 1);  // nothing taken: each named its checkpoint
  });

  test('create({ from }) with a field a fork cannot have is berthd\'s InvalidArgumentError naming it', async () => {
    await assert.rejects(Workspace.create({ ...conn, name: `wide-${n}`, size: 'large', from: { workspace: src.id } }),
                         (e) => e instanceof InvalidArgumentError && e.status === 400
                           && e.message.includes("'size' cannot be given with 'from'"));
    await assert.rejects(Workspace.create({ ...conn, name: `orphan-${n}`, from: { workspace: 'no-such-workspace' } }),
                         NotFoundError);
  });

  test('templates against berthd: none listed, unknown ones 404, a checkpoint without memory 409', async () => {
    assert.deepEqual(await Templates.list(conn), []);
    await assert.rejects(Templates.get('nope', conn), (e) => e instanceof NotFoundError && e.status === 404);
    await assert.rejects(Templates.delete('nope', conn), (e) => e instanceof NotFoundError && e.status === 404);
    await assert.rejects(Workspace.create({ ...conn, name: `t-${n}`, template: 'nope' }),
                         (e) => e instanceof NotFoundError && e.message.includes("no template 'nope'"));
    await assert.rejects(Templates.create({ ...conn, name: `cold-${n}`, from: { workspace: src, checkpoint: 'base' } }),
                         (e) => e instanceof ConflictError && e.status === 409 && e.code === 'failed_precondition'
                           && e.message.includes('has no memory'));
    // Without a checkpoint berthd takes one with memory now: the stopped source has none.
    await assert.rejects(Templates.create({ ...conn, name: `cold-${n}`, from: { workspace: src.name } }), ConflictError);
    assert.deepEqual(await Templates.list(conn), []);
  });
});

describe('templates built from a script, against berthd', () => {
  const names = async () => { const s = new Set(); for await (const w of Workspace.list(conn)) s.add(w.name); return s; };

  test('a script template is 202 building with its request, then wait() throws TemplateBuildError with the script\'s exit and output', async () => {
    const name = `ts-build-${++n}`;
    const t = await Templates.create({ ...conn, name, script: 'echo step-one; echo to-stderr >&2; exit 3', ready: 'true',
                                       buildTimeout: '2m', wait: false });
    try {
      // berthd's 202: building in a workspace of its own, no checkpoint yet, the request kept.
      assert.deepEqual([t.name, t.state, t.checkpoint_id, t.error], [name, 'building', '', undefined]);
      assert.deepEqual([t.script, t.start, t.ready, t.timeout_s], ['echo step-one; echo to-stderr >&2; exit 3', undefined, 'true', 120]);
      assert.deepEqual([t.workspace, t.image, t.cpus, t.memory_mib], [`template-${name}`, 'base', 1, 1024]);
      assert.equal(t.build_log, undefined);  // only GET /v1/templates/{tpl} carries the log
      const e = await Templates.wait(name, { ...conn, timeoutMs: 120_000 }).then(() => null, (x) => x);
      assert.ok(e instanceof TemplateBuildError, `wait() answered ${e}`);
      // The script ran through the build workspace's agent: its exit and its output.
      assert.deepEqual([e.error, e.buildLog, e.template.state, e.template.id], ['the script exited with 3', 'step-one\nto-stderr\n', 'failed', t.id]);
      assert.ok(e.message.includes('the script exited with 3') && e.message.includes('step-one'), e.message);
      assert.deepEqual([e.code, e.status, e.retryable], ['template_build_failed', 0, false]);
      // berthd deletes a failed build's workspace; the template stays, failed, until deleted.
      await waitFor('the failed build\'s workspace to be deleted', async () => !(await names()).has(`template-${name}`), 30_000);
      assert.deepEqual((await Templates.list(conn)).map((x) => [x.name, x.state, x.error]), [[name, 'failed', 'the script exited with 3']]);
      await assert.rejects(Workspace.create({ ...conn, name: `from-failed-${n}`, template: name }),
                           (x) => x instanceof ConflictError && x.status === 409 && x.message.includes('failed to build'));
      await assert.rejects(Templates.create({ ...conn, name, script: 'true', wait: false }),
                           (x) => x instanceof ConflictError && x.code === 'already_exists' && x.message.includes('delete it to build it again'));
    } finally {
      await Templates.delete(name, conn);
    }
    assert.deepEqual(await Templates.list(conn), []);
  });

  test('create({ script }) waits by default until the build failed and throws it', async () => {
    const name = `ts-wait-${++n}`;
    const started = Date.now();
    try {
      await assert.rejects(Templates.create({ ...conn, name, script: 'echo half-way; sleep 1; false; echo never' }),
                           (e) => e instanceof TemplateBuildError && e.error === 'the script exited with 1' && e.buildLog === 'half-way\n');
      assert.ok(Date.now() - started >= 1000, 'create() returned before the script\'s sleep was over');
      assert.equal((await Templates.get(name, conn)).state, 'failed');
    } finally {
      await Templates.delete(name, conn);
    }
  });

  test('script template refusals: both forms or neither before sending, berthd\'s 400s for its limits; nothing made', async () => {
    const before = await names();
    for (const bad of [{ name: 'both', from: { workspace: 'x' }, script: 'true' }, { name: 'none' },
                       { name: 'half', from: { workspace: 'x' }, start: 'make dev' }]) {
      await assert.rejects(Templates.create({ ...conn, ...bad }),
                           (e) => e instanceof InvalidArgumentError && e.status === 0 && e.message.includes('script'));
    }
    // ... as berthd itself refuses both.
    const both = await berthd.api('POST', '/v1/templates', { name: 'both', script: 'true', from: { workspace: 'x' } });
    assert.deepEqual([both.status, both.body.error.message], [400, "give either 'from' or 'script', not both"]);
    for (const [extra, message] of [[{ name: 'a'.repeat(49) }, 'at most 48 characters'],
                                    [{ buildTimeout: 5 }, "'timeout_s' must be between 10 and 7200"],
                                    [{ size: 'huge' }, "'size' must be small, medium or large"],
                                    [{ script: '' }, "'script' must not be empty"]]) {
      await assert.rejects(Templates.create({ ...conn, name: `bad-${++n}`, script: 'true', ...extra }),
                           (e) => e instanceof InvalidArgumentError && e.status === 400 && e.message.includes(message));
    }
    assert.deepEqual(await Templates.list(conn), []);
    assert.deepEqual(await names(), before);
  });
});

// A stand-in berthd: answers from `script` ([status, body] per request, in order; 'drop' closes
// the connection without an answer) and records each request as [method, url, body or null,
// headers].
async function standIn(script) {
  const seen = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      seen.push([req.method, req.url, body ? JSON.parse(body) : null, req.headers]);
      const next = script.shift() ?? [500, { error: { code: 'internal', message: 'script ran out' } }];
      if (next === 'drop') {
        req.socket.destroy();
        return;
      }
      const [status, answer] = next;
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(answer));
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    seen,
    script,
    conn: { apiUrl: `http://127.0.0.1:${server.address().port}`, apiKey: 'k' },
    close: () => { server.closeAllConnections(); server.close(); },
  };
}

const kWs = { id: 'ws_0123456789abcdef', name: 'stub', state: 'running' };
const kTpl = { id: 'tpl_0123456789abcdef', name: 'py-db', workspace_id: kWs.id, checkpoint_id: 'cp_0123456789abcdef',
               workspace: 'stub', image: 'base', cpus: 2, memory_mib: 2048, disk_gib: 10, created_by: 'key_x',
               created_at: '2026-12-04T00:00:00Z' };

test('Templates send berthd\'s fields and paths and answer its templates (a stand-in server)', async () => {
  const { workspace, image, cpus, memory_mib, disk_gib, ...bare } = kTpl;  // its workspace gone
  const stub = await standIn([[201, kTpl], [201, kTpl], [200, { templates: [kTpl, bare] }], [200, kTpl], [200, kTpl]]);
  try {
    const t = await Templates.create({ ...stub.conn, name: 'py-db', from: { workspace: kWs, checkpoint: 'warm' } });
    assert.deepEqual(t, kTpl);
    await Templates.create({ ...stub.conn, name: 'py-db', from: { workspace: 'stub' } });
    const listed = await Templates.list(stub.conn);
    assert.deepEqual(listed.map((x) => [x.name, x.cpus]), [['py-db', 2], ['py-db', undefined]]);
    assert.equal((await Templates.get('py db', stub.conn)).id, kTpl.id);
    assert.equal((await Templates.delete('py-db', stub.conn)).id, kTpl.id);
    assert.deepEqual(stub.seen.map(([m, u, b]) => [m, u, b]), [
      ['POST', '/v1/templates', { name: 'py-db', from: { workspace: kWs.id, checkpoint: 'warm' } }],
      ['POST', '/v1/templates', { name: 'py-db', from: { workspace: 'stub' } }],
      ['GET', '/v1/templates', null],
      ['GET', '/v1/templates/py%20db', null],  // a name is one path segment
      ['DELETE', '/v1/templates/py-db', null],
    ]);
    assert.ok(stub.seen.every(([, , , h]) => h.authorization === 'Bearer k'));
  } finally {
    stub.close();
  }
});

test('create({ template | from }), ws.fork() and checkpoints.fork send only their fields, with no Idempotency-Key (a stand-in server)', async () => {
  const forks = [1, 2, 3].map((i) => ({ ...kWs, id: `ws_${String(i).padStart(16, '0')}`, name: `twig-${i}`, state: 'creating' }));
  const stub = await standIn([
    [201, { ...kWs, state: 'creating' }], [200, kWs],  // create from a template, then POST …/wait
    [201, kWs], [201, kWs],                            // ws.fork(), create({ from })
    [201, { workspaces: forks }], [201, { workspaces: forks.slice(0, 1) }],
    [201, kWs],                                        // a plain create: with its key
  ]);
  try {
    const ws = await Workspace.create({ ...stub.conn, name: 'from-tpl', template: 'py-db', labels: { a: 'b' } });
    assert.equal(ws.state, 'running');  // waited for, as any create
    await ws.fork({ name: 'now' });
    await Workspace.create({ ...stub.conn, name: 'of-cp', from: { workspace: 'src', checkpoint: 'base' } });
    const got = await ws.checkpoints.fork('base', { name: 'twig', count: 3, labels: { x: 'y' }, wait: false });
    assert.deepEqual(got.map((f) => [f.id, f.name, f.state]), forks.map((f) => [f.id, f.name, 'creating']));
    assert.ok(got.every((f) => f instanceof Workspace));
    await ws.checkpoints.fork('cp_0123456789abcdef', { name: 'twig', wait: false });
    await Workspace.create({ ...stub.conn, name: 'plain', wait: false });
    const posts = stub.seen.filter(([m]) => m === 'POST');
    assert.equal(posts[1][1], `/v1/workspaces/${kWs.id}/wait`);
    const cps = `/v1/workspaces/${kWs.id}/checkpoints`;
    assert.deepEqual(posts.filter((_, i) => i !== 1).map(([, u, b]) => [u, b]), [
      ['/v1/workspaces', { name: 'from-tpl', template: 'py-db', labels: { a: 'b' } }],
      ['/v1/workspaces', { name: 'now', from: { workspace: kWs.id } }],
      ['/v1/workspaces', { name: 'of-cp', from: { workspace: 'src', checkpoint: 'base' } }],
      [`${cps}/base/fork`, { name: 'twig', count: 3, labels: { x: 'y' } }],
      [`${cps}/cp_0123456789abcdef/fork`, { name: 'twig' }],  // count 1 is berthd's default: not sent
      ['/v1/workspaces', { name: 'plain' }],
    ]);
    // berthd takes no Idempotency-Key for a fork: only the plain create carries one.
    assert.deepEqual(posts.map(([, , , h]) => h['idempotency-key'] !== undefined),
                     [false, false, false, false, false, false, true]);
  } finally {
    stub.close();
  }
});

const kBuilding = {
  id: 'tpl_00000000000000b1', name: 'ts-web', workspace_id: kWs.id, checkpoint_id: '', workspace: 'template-ts-web',
  image: 'desktop', cpus: 2, memory_mib: 2048, disk_gib: 10, created_by: 'key_x', created_at: '2026-12-04T00:00:00Z',
  state: 'building', script: 'npm ci', start: 'npm run dev', ready: 'curl -sf localhost:3000', timeout_s: 600,
};
const kReady = { ...kBuilding, state: 'ready', checkpoint_id: 'cp_00000000000000b1',
                 build_log: 'added 312 packages\n$ curl -sf localhost:3000 (exited 0 after 4 tries)\n' };
// A failed build's workspace is gone, and with it what a workspace from it would be.
const { workspace: _w, image: _i, cpus: _c, memory_mib: _m, disk_gib: _d, ...kFailedBase } = kBuilding;
const kFailed = { ...kFailedBase, state: 'failed', error: 'the script exited with 1',
                  build_log: Array.from({ length: 500 }, (_, i) => `line ${i + 1}\n`).join('') + 'npm ERR! missing script\n' };

test('create({ script }) sends the script form once and polls GET by id until ready (a stand-in server)', async () => {
  const stub = await standIn([[202, kBuilding], [200, { ...kBuilding, build_log: '' }], [200, kReady], [202, kBuilding]]);
  try {
    const t = await Templates.create({ ...stub.conn, name: 'ts-web', script: 'npm ci', start: 'npm run dev',
                                       ready: 'curl -sf localhost:3000', image: 'desktop', size: 'medium', buildTimeout: '10m' });
    assert.deepEqual(t, kReady);
    // wait: false: berthd's 202 as it is, nothing more asked; only the fields given are sent.
    assert.equal((await Templates.create({ ...stub.conn, name: 'ts-web', script: 'true', wait: false })).state, 'building');
    assert.deepEqual(stub.seen.map(([m, u, b]) => [m, u, b]), [
      ['POST', '/v1/templates', { name: 'ts-web', script: 'npm ci', start: 'npm run dev', ready: 'curl -sf localhost:3000',
                                  image: 'desktop', size: 'medium', timeout_s: 600 }],
      // By id: a template deleted and built again under its name is another one.
      ['GET', `/v1/templates/${kBuilding.id}`, null],
      ['GET', `/v1/templates/${kBuilding.id}`, null],
      ['POST', '/v1/templates', { name: 'ts-web', script: 'true' }],
    ]);
    assert.ok(stub.seen.every(([, , , h]) => h['idempotency-key'] === undefined));
  } finally {
    stub.close();
  }
});

test('wait() throws TemplateBuildError with the error and the end of the log; one not building is answered at once (a stand-in server)', async () => {
  const stub = await standIn([[200, kBuilding], [200, kFailed], [200, kReady]]);
  try {
    const e = await Templates.wait('ts-web', stub.conn).then(() => null, (x) => x);
    assert.ok(e instanceof TemplateBuildError, `wait() answered ${e}`);
    assert.deepEqual([e.error, e.buildLog, e.template.state, e.template.workspace], ['the script exited with 1', kFailed.build_log, 'failed', undefined]);
    assert.ok(e.message.startsWith("template 'ts-web' failed to build: the script exited with 1\n"), e.message);
    // The end of the log, from a line's start, not all of it.
    assert.ok(e.message.endsWith('line 500\nnpm ERR! missing script') && e.message.includes('\n…line '), e.message);
    assert.ok(!e.message.includes('\nline 1\n') && e.message.length < 2200, `the message has ${e.message.length} characters`);
    assert.equal((await Templates.wait('ts-web', stub.conn)).state, 'ready');
    assert.deepEqual(stub.seen.map(([m, u]) => [m, u]), [
      ['GET', '/v1/templates/ts-web'], ['GET', `/v1/templates/${kBuilding.id}`], ['GET', '/v1/templates/ts-web']]);
  } finally {
    stub.close();
  }
});

test('wait() gives up at timeoutMs, and a POST whose answer was lost is not sent again (a stand-in server)', async () => {
  const stub = await standIn(Array.from({ length: 20 }, () => [200, kBuilding]));
  try {
    const started = Date.now();
    await assert.rejects(Templates.wait('ts-web', { ...stub.conn, timeoutMs: 1000 }),
                         (e) => e instanceof TimeoutError && e.message.includes('still building') && e.message.includes('template-ts-web'));
    assert.ok(Date.now() - started < 3000);
    assert.ok(stub.seen.length >= 2 && stub.seen.length <= 4, `${stub.seen.length} GETs: polled, not hammered`);
    assert.ok(stub.seen.every(([m]) => m === 'GET'));
    // No answer to the POST: berthd may have started the build; the SDK does not start another.
    stub.script.splice(0, stub.script.length, 'drop', [202, kBuilding]);
    const before = stub.seen.length;
    await assert.rejects(Templates.create({ ...stub.conn, name: 'ts-web', script: 'true' }), UnavailableError);
    assert.deepEqual(stub.seen.slice(before).map(([m]) => m), ['POST']);
  } finally {
    stub.close();
  }
});
