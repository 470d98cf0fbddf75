// ws.desktop's eyes and hands (GET …/desktop/screenshot, POST …/desktop/actions) against a real
// berthd (--transport unix; test/harness.mjs) with a real RFB server at the workspace's VNC
// socket: QEMU with a VGA screen and no guest (-S), as tests/integration/desktop_support.cc runs
// it, listening where berthd looks (<data>/workspaces/<id>/run/vnc.sock,
// controller/workspace/layout.h). Also the typed LockedError while a person holds the desktop,
// the guest's clipboard (berthd's desktop.clipboard_tool the harness's fake: its text in a file
// beside it), and the SDK's own checks, which refuse what berthd would refuse without calling it.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startBerthd, waitFor } from './harness.mjs';
import { ConflictError, InvalidArgumentError, LockedError, Screenshot, TimeoutError, UnavailableError, Workspace, kMaxClipboard } from '../dist/index.js';

let berthd;
let conn;
let ws;
let qemu;
let qemuExited = null;

before(async () => {
  berthd = await startBerthd({ clipboard: true });
  conn = { apiUrl: berthd.url, apiKey: berthd.key };
  ws = await Workspace.create({ ...conn, name: 'sdk-desktop' });
  const run = path.join(berthd.tmp, 'data', 'workspaces', ws.id, 'run');
  fs.mkdirSync(run, { recursive: true });
  const socket = path.join(run, 'vnc.sock');
  const log = fs.openSync(path.join(berthd.tmp, 'qemu.log'), 'w');
  qemu = spawn('qemu-system-x86_64', ['-machine', 'pc', '-accel', 'tcg', '-m', '64', '-nodefaults', '-vga', 'std',
                                      '-S', '-display', `vnc=unix:${socket}`], { stdio: ['ignore', log, log] });
  qemu.on('exit', (code, signal) => { qemuExited = { code, signal }; });
  await waitFor("QEMU's VNC socket", () => {
    if (qemuExited) throw new Error(`QEMU exited: ${fs.readFileSync(path.join(berthd.tmp, 'qemu.log'), 'utf8')}`);
    return fs.existsSync(socket);
  }, 30_000);
});

after(async () => {
  if (qemu && !qemuExited) {
    qemu.kill('SIGTERM');
    await waitFor('QEMU to exit', () => qemuExited, 10_000).catch(() => qemu.kill('SIGKILL'));
  }
  const exited = await berthd?.stop();
  assert.deepEqual(exited, { code: 0, signal: null }, 'berthd exited cleanly');
});

function pngSize(data) {
  const b = Buffer.from(data);
  assert.deepEqual([...b.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'a PNG signature');
  assert.equal(b.subarray(12, 16).toString('latin1'), 'IHDR');
  return [b.readUInt32BE(16), b.readUInt32BE(20)];
}

// The size in a JPEG's SOF segment (baseline or progressive).
function jpegSize(data) {
  const b = Buffer.from(data);
  assert.ok(b[0] === 0xff && b[1] === 0xd8, 'a JPEG SOI');
  for (let at = 2; at + 9 < b.length;) {
    assert.equal(b[at], 0xff);
    const marker = b[at + 1];
    if (marker >= 0xc0 && marker <= 0xc2) return [b.readUInt16BE(at + 7), b.readUInt16BE(at + 5)];
    at += 2 + b.readUInt16BE(at + 2);
  }
  throw new Error('no SOF segment');
}

describe('desktop screen', () => {
  test('a screenshot is a PNG of the size it states; scale 0.5 halves it; JPEG works', async () => {
    const shot = await ws.desktop.screenshot();
    assert.ok(shot instanceof Screenshot);
    assert.equal(shot.format, 'png');
    assert.equal(shot.mimeType, 'image/png');
    const { width: w, height: h } = shot.screen;
    assert.ok(w >= 320 && h >= 200, `QEMU's VGA screen (720x400), not ${w}x${h}`);
    assert.deepEqual(pngSize(shot.data), [w, h]);
    assert.deepEqual(shot.image, shot.screen);
    assert.equal(shot.scaled, false);
    assert.deepEqual(shot.toScreen(10, 20), { x: 10, y: 20 });

    const half = await ws.desktop.screenshot({ scale: 0.5 });
    assert.deepEqual(half.screen, shot.screen);
    assert.deepEqual(half.image, { width: Math.round(w * 0.5), height: Math.round(h * 0.5) });
    assert.deepEqual(pngSize(half.data), [half.image.width, half.image.height]);
    assert.deepEqual(half.toScreen(0, 0), { x: 1, y: 1 });
    assert.deepEqual(half.toScreen(half.image.width - 1, half.image.height - 1), { x: w - 1, y: h - 1 });

    const jpeg = await ws.desktop.screenshot({ format: 'jpeg', quality: 50 });
    assert.equal(jpeg.format, 'jpeg');
    assert.equal(jpeg.mimeType, 'image/jpeg');
    assert.deepEqual(jpegSize(jpeg.data), [w, h]);

    for (const bad of [{ scale: 0 }, { scale: 1.5 }, { format: 'gif' }, { quality: 0 }]) {
      await assert.rejects(ws.desktop.screenshot(bad), InvalidArgumentError);
    }
  });

  test('actions: click and type, the shortcuts, a mixed batch', async () => {
    const { screen } = await ws.desktop.screenshot();
    const done = await ws.desktop.act([{ type: 'click', x: 10, y: 10 }, { type: 'type', text: 'hello, world\n' }]);
    assert.deepEqual(done, { done: 2, screen });
    assert.equal((await ws.desktop.click(screen.width - 1, screen.height - 1, { count: 2 })).done, 1);
    assert.equal((await ws.desktop.type('ls -la\t~')).done, 1);
    assert.equal((await ws.desktop.key('ctrl+shift+t')).done, 1);
    assert.equal((await ws.desktop.scroll(5, 5, { dy: 3, dx: -1 })).done, 1);
    assert.equal((await ws.desktop.drag([1, 1], [50, 40])).done, 1);
    assert.equal((await ws.desktop.move(3, 4)).done, 1);
    const batch = [
      { type: 'move', x: 1, y: 1 }, { type: 'click', button: 'right' },
      { type: 'drag', path: [[1, 1], [2, 2], [3, 3]] }, { type: 'drag', from: [4, 4], to: [5, 5] },
      { type: 'scroll', dy: -2 }, { type: 'key', keys: 'Return' }, { type: 'hold_key', keys: 'shift', ms: 10 },
      { type: 'wait', ms: 10 }, { type: 'mouse_down', x: 2, y: 2 }, { type: 'mouse_up' },
    ];
    assert.equal((await ws.desktop.act(batch)).done, batch.length);
    // Only the screen's bounds are berthd's to check: its 400.
    await assert.rejects(ws.desktop.click(screen.width, 0), (e) => e instanceof InvalidArgumentError && e.status === 400);
  });

  test('a takeover makes actions LockedError (holder human) until release', async () => {
    const taken = await ws.desktop.takeOver({ reason: 'solve a captcha' });
    try {
      assert.equal(taken.holder, 'human');
      const e = await ws.desktop.click(10, 10).then(() => null, (err) => err);
      assert.ok(e instanceof LockedError, `LockedError, not ${e}`);
      assert.equal(e.status, 423);
      assert.equal(e.code, 'locked');
      assert.equal(e.retryable, false);
      assert.equal(e.holder, 'human');
      assert.ok(e.since && e.since === taken.since);
      assert.equal(e.by, taken.by);
      assert.equal(e.reason, 'solve a captcha');
      assert.equal(e.private, false);
      // Not private: the agent still sees the screen.
      assert.ok((await ws.desktop.screenshot({ scale: 0.25 })).image.width > 0);
      await ws.desktop.release();
      await ws.desktop.takeOver({ private: true });
      const hidden = await ws.desktop.screenshot().then(() => null, (err) => err);
      assert.ok(hidden instanceof LockedError && hidden.private === true && hidden.holder === 'human');
    } finally {
      assert.equal((await ws.desktop.release({ note: 'done' })).holder, 'agent');
    }
    assert.equal((await ws.desktop.type('back')).done, 1);
    // A lease of the person's own: berthd's lease_expires is that far off.
    const short = await ws.desktop.takeOver({ leaseMs: 60_000 });
    const lasts = (Date.parse(short.lease_expires) - Date.parse(short.since)) / 1000;
    assert.ok(lasts >= 59 && lasts <= 61, `a 60 s lease lasts ${lasts} s`);
    await ws.desktop.release();
  });

  test('the SDK refuses what berthd would, without calling it', async () => {
    // A handle on an address where nothing listens: a call would be an UnavailableError, so
    // an InvalidArgumentError proves the SDK refused it itself.
    const server = net.createServer();
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = server.address().port;
    await new Promise((resolve) => server.close(resolve));
    const nowhere = (await import('../dist/desktop.js')).Desktop;
    const { ApiClient } = await import('../dist/client.js');
    const dead = new nowhere(new ApiClient({ apiUrl: `http://127.0.0.1:${port}`, apiKey: 'bk_none', requestTimeoutMs: 3000 }), 'ws_nowhere');
    await assert.rejects(dead.click(1, 1), UnavailableError);  // the control: this one is sent
    const refused = [
      () => dead.type('héllo'),                                             // not on the en-us map
      () => dead.type('emoji \u{1F600}'),
      () => dead.type('x'.repeat(10_001)),                                  // over 10 000 characters
      () => dead.act(Array(201).fill({ type: 'move', x: 1, y: 1 })),        // over 200 actions
      () => dead.act([]),
      () => dead.act([{ type: 'click' }]),                                  // no position yet
      () => dead.act(Array(4).fill({ type: 'wait', ms: 10_000 })),          // 40 s of pauses
      () => dead.act({ type: 'teleport' }),
      () => dead.key('ctrl+banana'),
      () => dead.key('hyper+a'),
      () => dead.click(1, 1, { count: 4 }),
      () => dead.click(1.5, 1),
      () => dead.scroll(1, 1, { dy: 51 }),
      () => dead.click(-1, 5),
      () => dead.act({ type: 'drag', path: [[1, 1]] }),
      () => dead.screenshot({ scale: 0.01 }),
      () => dead.setClipboard(5),
      () => dead.setClipboard(null),
      () => dead.setClipboard(Buffer.from('bytes')),
      () => dead.setClipboard('lone \ud800 surrogate'),
      () => dead.setClipboard('\udc00'),
    ];
    for (const call of refused) {
      await assert.rejects(call(), (e) => e instanceof InvalidArgumentError && e.status === 0 && e.code === 'invalid_argument');
    }
    for (const huge of ['x'.repeat(kMaxClipboard + 1), '\u00e9'.repeat(kMaxClipboard / 2 + 1)]) {
      await assert.rejects(dead.setClipboard(huge), (e) => e instanceof InvalidArgumentError && e.status === 0 && e.code === 'too_large');
    }
    await assert.rejects(dead.setClipboard('sent'), UnavailableError);  // the control: this one is sent
    // Typing what the keyboard map lacks says how to send it instead.
    await assert.rejects(dead.type('h\u00e9llo'), (e) => e instanceof InvalidArgumentError && /setClipboard/.test(e.message) && /ctrl\+v/.test(e.message));
    assert.equal(ws.desktop.cdpUrl(), `${berthd.url}/v1/workspaces/${ws.id}/desktop/cdp`);
    const other = new nowhere(new ApiClient({ apiUrl: 'http://h:8420/', apiKey: 'k' }), 'a b');
    assert.equal(other.cdpUrl(), 'http://h:8420/v1/workspaces/a%20b/desktop/cdp');
  });
});

const kText = 'p\u00e4ssw\u00f6rd-free: \u4e16\u754c \u2713 \u{1F600}\n\ttabs and "quotes"';
// The desktop_clipboard_set events, once there are `count` (berthd writes the timeline just
// after it answers).
async function clipboardEvents(count) {
  let events = [];
  await waitFor(`${count} desktop_clipboard_set events`, async () => {
    ({ events } = (await berthd.api('GET', `/v1/workspaces/${ws.id}/events?type=desktop_clipboard_set&limit=1000`)).body);
    return events.length >= count;
  }, 10_000).catch(() => {});
  return events;
}
const stored = () => fs.readFileSync(path.join(berthd.clipboard, 'text'), 'utf8');

describe('desktop clipboard', () => {
  test('any Unicode there and back; the timeline says who and how many bytes, never the text', async () => {
    assert.equal(await ws.desktop.setClipboard(kText), Buffer.byteLength(kText));
    assert.equal(stored(), kText);  // the tool got exactly these bytes on its stdin
    assert.equal(await ws.desktop.clipboard(), kText);
    assert.equal(await ws.desktop.setClipboard(''), 0);
    assert.equal(await ws.desktop.clipboard(), '');
    // Near the 1 MiB limit in characters of 2, 3 and 4 bytes. Not up to 1 MiB exactly: berthd
    // hands the text to the agent inside a JSON request of its own, whose limit (1 MiB) counts
    // the rest of that request too.
    const big = '\u00e9\u4e16\u{1F600}'.repeat(Math.floor((kMaxClipboard - 1024) / 9));
    assert.ok(Buffer.byteLength(big) > kMaxClipboard - 1024 - 9);
    assert.equal(await ws.desktop.setClipboard(big), Buffer.byteLength(big));
    assert.equal(await ws.desktop.clipboard(), big);
    await ws.desktop.setClipboard(kText);
    const events = await clipboardEvents(4);
    assert.deepEqual(events.map((e) => e.data.bytes), [Buffer.byteLength(kText), 0, Buffer.byteLength(big), Buffer.byteLength(kText)]);
    assert.ok(events.every((e) => e.data.holder === 'agent' && e.actor.startsWith('key_')));
    const kept = JSON.stringify(events);
    assert.ok(!kept.includes('rd-free') && !kept.includes('\u4e16'), 'the timeline keeps no text');
  });

  test('while a person holds control only they set it (LockedError for the agent); private hides it', async () => {
    await ws.desktop.setClipboard('before');
    const made = await berthd.api('POST', '/v1/keys', { scope: 'write', name: 'clipboard-person' });
    assert.equal(made.status, 201);
    const person = await Workspace.connect(ws.id, { ...conn, apiKey: made.body.key });
    const taken = await person.desktop.takeOver({ reason: 'paste a password' });
    try {
      const e = await ws.desktop.setClipboard("the agent's").then(() => null, (err) => err);
      assert.ok(e instanceof LockedError, `LockedError, not ${e}`);
      assert.equal(e.status, 423);
      assert.equal(e.retryable, false);
      assert.equal(e.holder, 'human');
      assert.equal(e.by, made.body.id);
      assert.equal(e.by, taken.by);
      assert.equal(e.reason, 'paste a password');
      assert.equal(await ws.desktop.clipboard(), 'before');  // reading stays allowed
      // The person holding control sets it with their own key.
      const theirs = "the person's \u2713";
      assert.equal(await person.desktop.setClipboard(theirs), Buffer.byteLength(theirs));
      assert.equal(await ws.desktop.clipboard(), theirs);
      const events = await clipboardEvents(6);
      assert.equal(events.at(-1).data.holder, 'human');
      assert.equal(events.at(-1).actor, made.body.id);
      // A private takeover: the person may have copied a password; the agent cannot read it.
      await person.desktop.release();
      await person.desktop.takeOver({ private: true });
      const hidden = await ws.desktop.clipboard().then(() => null, (err) => err);
      assert.ok(hidden instanceof LockedError && hidden.private === true && hidden.holder === 'human', `${hidden}`);
      // docs/api.md: the person holding the private takeover still reads it.
      assert.equal(await person.desktop.clipboard(), theirs);
    } finally {
      assert.equal((await person.desktop.release()).holder, 'agent');
    }
    assert.equal(await ws.desktop.setClipboard('after'), 5);
  });

  test('no display yet is UnavailableError; an image without the tool ConflictError', async () => {
    const down = path.join(berthd.clipboard, 'down');
    fs.writeFileSync(down, '');
    try {
      const e = await ws.desktop.clipboard().then(() => null, (err) => err);
      assert.ok(e instanceof UnavailableError && e.status === 503 && /not up/.test(e.message), `${e}`);
    } finally {
      fs.rmSync(down);
    }
    const tool = path.join(berthd.clipboard, 'clipboard');
    fs.renameSync(tool, `${tool}.away`);
    try {
      const e = await ws.desktop.setClipboard('x').then(() => null, (err) => err);
      assert.ok(e instanceof ConflictError && !(e instanceof LockedError), `ConflictError, not ${e}`);
      assert.equal(e.status, 409);
      assert.equal(e.code, 'failed_precondition');
    } finally {
      fs.renameSync(`${tool}.away`, tool);
    }
    assert.equal(await ws.desktop.setClipboard('back'), 4);
  });
});

// The control state's revision and waitForControlChange (GET …/desktop/control?wait=change
// &revision=N): a takeover by another key wakes the waiter at once with the new revision, a
// renewal of the lease does not; the wait is asked again across berthd's own waits until the
// caller's timeout; requestTimeoutMs bounds the whole call; a workspace that stops ends it
// with ConflictError.
describe('desktop control changes', () => {
  let person;
  let personKey;

  before(async () => {
    const made = await berthd.api('POST', '/v1/keys', { scope: 'write', name: 'control-wait-person' });
    assert.equal(made.status, 201);
    personKey = made.body;
    person = await Workspace.connect(ws.id, { ...conn, apiKey: personKey.key });
    if ((await ws.desktop.control()).holder !== 'agent') await ws.desktop.release();
  });

  test('the revision changes with takeover and release, not with a renewal', async () => {
    const r0 = (await ws.desktop.control()).revision;
    assert.ok(Number.isInteger(r0) && r0 >= 0, `revision ${r0}`);
    const taken = await person.desktop.takeOver({ reason: 'a person' });
    try {
      assert.ok(taken.holder === 'human' && taken.revision > r0);
      assert.equal((await person.desktop.takeOver({ reason: 'a person' })).revision, taken.revision);  // renewed
    } finally {
      const back = await person.desktop.release({ note: 'done' });
      assert.ok(back.holder === 'agent' && back.revision > taken.revision);
    }
  });

  test("another key's takeover wakes the waiter with the new revision; revision omitted waits from now", async () => {
    const r0 = (await ws.desktop.control()).revision;
    let doneAt = 0;
    const waiting = ws.desktop.waitForControlChange({ revision: r0, timeoutMs: 60_000 }).finally(() => { doneAt = Date.now(); });
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(doneAt, 0, 'the wait ended before any change');
    const t0 = Date.now();
    const taken = await person.desktop.takeOver({ reason: 'wake the waiter' });
    try {
      const got = await waiting;
      assert.equal(got.revision, taken.revision);
      assert.notEqual(got.revision, r0);
      assert.equal(got.holder, 'human');
      assert.equal(got.by, personKey.id);
      assert.equal(got.reason, 'wake the waiter');
      assert.ok(doneAt - t0 < 2000, `woke ${doneAt - t0} ms after the takeover`);
      const next = ws.desktop.waitForControlChange({ timeoutMs: 60_000 });
      await new Promise((r) => setTimeout(r, 500));
      const back = await person.desktop.release();
      const seen = await next;
      assert.equal(seen.holder, 'agent');
      assert.equal(seen.revision, back.revision);
    } finally {
      if ((await ws.desktop.control()).holder !== 'agent') await person.desktop.release();
    }
  });

  test('a renewal of the lease does not wake the waiter: the unchanged state at the timeout', async () => {
    const taken = await person.desktop.takeOver();
    try {
      const t0 = Date.now();
      const waiting = ws.desktop.waitForControlChange({ revision: taken.revision, timeoutMs: 3000 });
      await new Promise((r) => setTimeout(r, 500));
      assert.equal((await person.desktop.takeOver()).revision, taken.revision);  // renewed
      const got = await waiting;
      assert.equal(got.revision, taken.revision);
      assert.equal(got.holder, 'human');
      assert.ok(Date.now() - t0 >= 2000, `answered after ${Date.now() - t0} ms`);
    } finally {
      await person.desktop.release();
    }
  });

  test("the wait is asked again across berthd's waits until the caller's timeout", async () => {
    const r0 = (await ws.desktop.control()).revision;
    const t0 = Date.now();
    let doneAt = 0;
    const waiting = ws.desktop.waitForControlChange({ revision: r0, timeoutMs: 30_000, stepMs: 1000 })
      .finally(() => { doneAt = Date.now(); });
    await new Promise((r) => setTimeout(r, 3500));  // several of berthd's 1 s waits ran out
    assert.equal(doneAt, 0);
    const taken = await person.desktop.takeOver();
    try {
      assert.equal((await waiting).revision, taken.revision);
      assert.ok(doneAt - t0 > 3000);
      const t1 = Date.now();
      const same = await ws.desktop.waitForControlChange({ revision: taken.revision, timeoutMs: 2500, stepMs: 1000 });
      assert.equal(same.revision, taken.revision);
      const took = Date.now() - t1;
      assert.ok(took >= 1500 && took < 5000, `${took} ms`);
    } finally {
      await person.desktop.release();
    }
  });

  test('requestTimeoutMs bounds the whole wait; bad arguments are refused before any call', async () => {
    const r0 = (await ws.desktop.control()).revision;
    const t0 = Date.now();
    await assert.rejects(ws.desktop.waitForControlChange({ revision: r0, timeoutMs: 60_000, requestTimeoutMs: 3000 }),
                         (e) => e instanceof TimeoutError && e.code === 'deadline_exceeded');
    assert.ok(Date.now() - t0 < 5000, `${Date.now() - t0} ms`);
    await assert.rejects(ws.desktop.waitForControlChange({ revision: -1 }), InvalidArgumentError);
    await assert.rejects(ws.desktop.waitForControlChange({ revision: 1.5 }), InvalidArgumentError);
    await assert.rejects(ws.desktop.waitForControlChange({ timeoutMs: -5 }), InvalidArgumentError);
    await assert.rejects(ws.desktop.waitForControlChange({ stepMs: 10 }), InvalidArgumentError);
  });

  test('a workspace that stops ends the wait with ConflictError', async () => {
    const w = await Workspace.create({ ...conn, name: 'sdk-desktop-stops' });
    try {
      const r0 = (await w.desktop.control()).revision;
      let doneAt = 0;
      const waiting = w.desktop.waitForControlChange({ revision: r0, timeoutMs: 120_000, stepMs: 1000 })
        .then(() => null, (e) => e).finally(() => { doneAt = Date.now(); });
      await new Promise((r) => setTimeout(r, 1000));
      const t0 = Date.now();
      await w.stop();
      const e = await waiting;
      assert.ok(e instanceof ConflictError && e.code === 'failed_precondition' && /is stopp/.test(e.message), `${e}`);
      assert.ok(doneAt - t0 < 10_000, `${doneAt - t0} ms after the stop`);
    } finally {
      await w.delete();
    }
  });
});
