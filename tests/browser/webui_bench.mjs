#!/usr/bin/env node
// The web UI's benchmark (bench/run-webui-bench runs it): a real berthd on libvirt's test
// driver with --transport unix (as the integration test starts it) serving web/dist.
//
// 1. First load: every byte the browser receives (headers and bodies, as sent: berthd sends
//    the gzip twins) for the sign-in page, then signing in and the list, then a workspace's
//    terminal (xterm.js is loaded with the first terminal). Target: <= 400 KB in all.
// 2. 100 workspaces: the time from the start of a navigation to / until all 100 rows are in
//    the page (the check runs every animation frame), in a fresh browser context (nothing
//    cached) and on a reload (assets cached), against one GET /v1/workspaces from Node and
//    `berth ls` (when BERTH_CLI is set), measured in the same run.
// 3. Keystroke to echo (target: the web terminal <= `berth shell` + 5 ms at p50): printable
//    characters typed into an idle bash prompt in one workspace, one at a time, each after the
//    last one's echo, the line erased (ctrl+u) every 20 so it never wraps. In the web terminal
//    the times are the page's own (performance.now()): from the keydown event to the
//    MutationObserver callback that sees the character in xterm.js's rows (the DOM renderer;
//    the paint follows in the same frame); an init script notes when the page sends the key on
//    the WebSocket and when the echo's frame arrives, to split the time. The same page also
//    without a key event: the byte written on the terminal's socket by a script (what the
//    browser's input handling adds). `berth shell` two ways (when BERTH_CLI is set):
//    - like for like: drawn by the same terminal emulator in the same browser. pty_bridge.py
//      runs it under a pseudo-terminal behind a WebSocket on 127.0.0.1 (as ttyd does), and
//      cli_term.html draws it with web/node_modules' xterm.js (the web UI's package, version,
//      options and DOM renderer) in a host of the web terminal's size, in a page of the same
//      Chromium; timed exactly as the web terminal, with and without a key event. The bridge
//      reports its own times (its pty round trip, its own work) to split its share out.
//    - harsher: under a pseudo-terminal (pty_echo.py; there is no node-pty), from the write of
//      a byte to the pty until the byte is read back, no terminal emulator's drawing in it.
//    The sides alternate in rounds, after a warm-up each, on the same berthd, workspace, shell
//    (bash -l) and characters.
//
//   BERTHD_BIN=… BERTH_AGENT_BIN=… [BERTH_CLI=…] node webui_bench.mjs [--runs N] [--workspaces N] [--keystrokes N] [--out FILE]
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { startBerthd, waitFor } from '../../sdk/typescript/test/harness.mjs';
import { kViewports, launchChromium, lines, signIn, waitForText } from './webui_lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const { values: opts } = parseArgs({
  options: {
    runs: { type: 'string', default: '7' },
    workspaces: { type: 'string', default: '100' },
    keystrokes: { type: 'string', default: '200' },
    out: { type: 'string', default: path.join(root, 'build', 'BENCHMARKS-webui.md') },
  },
});
const kRuns = Number(opts.runs);
const kWorkspaces = Number(opts.workspaces);
const kTargetBytes = 400 * 1000;
const kKeystrokes = Number(opts.keystrokes);
const kTargetEchoMs = 5;     // issue 15: the web terminal at most 5 ms slower than `berth shell` at p50
const kWarmup = 20;          // keystrokes per side before the measured ones (JIT, caches, the agent's first reads)
const kRounds = 4;           // the sides alternate, so a burst of load elsewhere falls on both
const kLineChars = 20;       // typed before ctrl+u erases the line: no wrap at 80 columns
const kLetters = 'abcdefghijklmnopqrstuvwxyz';

function log(m) {
  process.stderr.write(`webui-bench: ${m}\n`);
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const kb = (n) => `${(n / 1000).toFixed(1)} KB`;
/** Nearest-rank percentile (p in 0..100). */
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.max(0, Math.ceil((p / 100) * s.length) - 1)];
};
const ms = (x) => `${x.toFixed(1)} ms`;

/** `n` characters as the lines to type, each at most kLineChars, cycling through the alphabet. */
function typingLines(n) {
  const out = [];
  for (let left = n; left > 0; left -= kLineChars) out.push(kLetters.slice(0, Math.min(left, kLineChars)));
  return out;
}

/** Bytes received per request (CDP's encodedDataLength: headers and body as sent). */
async function recordTransfers(page) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: false });
  const urls = new Map();
  const done = [];
  cdp.on('Network.responseReceived', (e) => urls.set(e.requestId, { url: e.response.url, encoding: e.response.headers['content-encoding'] ?? e.response.headers['Content-Encoding'] ?? '' }));
  cdp.on('Network.loadingFinished', (e) => {
    const r = urls.get(e.requestId);
    if (r) done.push({ ...r, bytes: e.encodedDataLength });
  });
  return {
    take() {
      return done.splice(0);
    },
  };
}

function sum(list) {
  return list.reduce((a, r) => a + r.bytes, 0);
}

async function firstLoad(browser, base, key) {
  const ctx = await browser.newContext({ viewport: kViewports.laptop });
  const page = await ctx.newPage();
  const rec = await recordTransfers(page);
  await page.goto(base, { waitUntil: 'networkidle' });
  await page.getByLabel('API key').waitFor();
  const signin = rec.take();
  await signIn(page, base, key);
  await page.locator('tr[data-workspace]').first().waitFor();
  await page.waitForTimeout(500);  // the list's event stream never idles: no 'networkidle'
  const list = rec.take().filter((r) => !r.url.includes('/v1/watch/'));
  const ws = await page.locator('tr[data-workspace] a').first().innerText();
  await page.goto(`${base}/w/${encodeURIComponent(ws)}/terminal`);
  await page.locator('.term-pane .term-status', { hasText: /^connected$/ }).waitFor({ timeout: 60_000 });
  await page.waitForTimeout(500);
  const terminal = rec.take().filter((r) => !r.url.includes('/v1/watch/') && !r.url.includes('/exec/ws'));
  // Then the Desktop tab (an in-app link): its first look loads noVNC's chunk.
  await page.locator('nav a', { hasText: /^Desktop$/ }).click();
  await page.waitForFunction(() => !document.body.innerText.includes('Loading the desktop viewer'), null, { timeout: 60_000 });
  await page.waitForTimeout(500);
  const desktop = rec.take().filter((r) => !new URL(r.url).pathname.startsWith('/v1/'));
  await ctx.close();
  if (!desktop.some((r) => /\/assets\/desktop-[^/]*\.js$/.test(new URL(r.url).pathname) && r.bytes > 20_000)) {
    throw new Error(`the Desktop tab loaded no noVNC chunk: ${desktop.map((r) => new URL(r.url).pathname).join(', ')}`);
  }
  const assets = [...signin, ...list, ...terminal, ...desktop].filter((r) => !new URL(r.url).pathname.startsWith('/v1/'));
  const unzipped = assets.filter((r) => /\.(js|css)$/.test(new URL(r.url).pathname) && r.encoding !== 'gzip');
  return { signin, list, terminal, desktop, assets, unzipped };
}

async function timeToList(browser, base, key, n) {
  // Signed in once; each run is a new context with only that cookie (an empty cache).
  const signer = await browser.newContext({ viewport: kViewports.laptop });
  await signIn(await signer.newPage(), base, key);
  const state = await signer.storageState();
  await signer.close();
  // performance.now() counts from the navigation's start; checked every animation frame.
  const shownAt = async (page) => (await page.waitForFunction(
    (want) => document.querySelectorAll('tr[data-workspace]').length >= want && performance.now(),
    n, { polling: 'raf', timeout: 60_000 })).jsonValue();
  const cold = [];
  const warm = [];
  for (let i = 0; i < kRuns; i++) {
    const ctx = await browser.newContext({ viewport: kViewports.laptop, storageState: state });
    const page = await ctx.newPage();
    await page.goto(base, { waitUntil: 'commit' });
    cold.push(await shownAt(page));
    await page.reload({ waitUntil: 'commit' });
    warm.push(await shownAt(page));
    await ctx.close();
  }
  return { cold, warm };
}

// In every page of the keystroke context, before the app's script: when keys go down, when
// the page sends binary frames on a WebSocket (the terminal's stdin), and when binary frames
// arrive (its output), all on the page's performance.now() clock. The message listener is
// added in the constructor, so it runs before the app's onmessage (term.write).
function noteTerminalTimes() {
  const t = { down: [], sent: [], recv: [] };
  window.__kbTimes = t;
  window.addEventListener('keydown', () => t.down.push(performance.now()), true);
  const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (data) {
    if (typeof data !== 'string') t.sent.push(performance.now());
    return send.call(this, data);
  };
  window.WebSocket = class extends WebSocket {
    constructor(...args) {
      super(...args);
      if (String(args[0]).includes('/exec/ws') || String(args[0]).endsWith('/pty')) window.__kbSocket = this;
      this.addEventListener('message', (e) => { if (typeof e.data !== 'string') t.recv.push(performance.now()); });
    }
  };
}

/** The web terminal of `ws`, ready to time keystrokes; type(line) returns one timing per character. */
async function openWebTerminal(browser, base, key, ws) {
  const ctx = await browser.newContext({ viewport: kViewports.laptop });
  await ctx.addInitScript(noteTerminalTimes);
  const page = await ctx.newPage();
  await signIn(page, base, key);
  await page.goto(`${base}/w/${encodeURIComponent(ws)}/terminal`);
  await page.locator('.term-pane .term-status', { hasText: /^connected$/ }).waitFor({ timeout: 60_000 });
  const t = await timedTyping(page, ctx);
  // The host's size, for the page that draws `berth shell` with the same xterm.js.
  t.host = await page.evaluate(() => {
    const h = document.querySelector('.term-host');
    const cs = getComputedStyle(h);
    const screen = document.querySelector('.term-host .xterm-screen');
    const rows = document.querySelectorAll('.term-host .xterm-rows > div').length;
    return { w: parseFloat(cs.width), h: parseFloat(cs.height), box: cs.boxSizing, rows, screenWidth: screen.offsetWidth };
  });
  return t;
}

/**
 * `berth shell ws` drawn by xterm.js in a page of the same browser: pty_bridge.py runs it
 * under a pseudo-terminal behind a WebSocket on 127.0.0.1; cli_term.html (served with
 * web/node_modules' xterm.js by a small server here) draws it with the web terminal's options
 * in a host of the web terminal's size. Timed exactly as the web terminal.
 */
async function openCliXterm(browser, cli, base, key, ws, host) {
  const bridge = spawn('/usr/bin/python3', [path.join(here, 'pty_bridge.py'), '--', cli, 'shell', ws], {
    env: { ...process.env, BERTH_URL: base, BERTH_API_KEY: key, TERM: 'xterm-256color', COLORTERM: 'truecolor' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  bridge.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise((resolve) => bridge.once('exit', resolve));
  const answers = readline.createInterface({ input: bridge.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await answers.next();
    if (done) throw new Error(`pty_bridge.py ended: ${stderr.trim()}`);
    return JSON.parse(value);
  };
  const { port } = await next();
  const files = {
    '/': [path.join(here, 'cli_term.html'), 'text/html'],
    '/xterm/css/xterm.css': [path.join(root, 'web/node_modules/@xterm/xterm/css/xterm.css'), 'text/css'],
    '/xterm/lib/xterm.js': [path.join(root, 'web/node_modules/@xterm/xterm/lib/xterm.js'), 'text/javascript'],
    '/addon-fit/lib/addon-fit.js': [path.join(root, 'web/node_modules/@xterm/addon-fit/lib/addon-fit.js'), 'text/javascript'],
  };
  const server = http.createServer((req, res) => {
    const f = files[new URL(req.url, 'http://x').pathname];
    if (!f) { res.writeHead(404).end(); return; }
    res.writeHead(200, { 'Content-Type': f[1] }).end(fs.readFileSync(f[0]));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const ctx = await browser.newContext({ viewport: kViewports.laptop });
  await ctx.addInitScript(noteTerminalTimes);
  const page = await ctx.newPage();
  await page.goto(`http://127.0.0.1:${server.address().port}/?port=${port}&w=${host.w}&h=${host.h}&box=${host.box}`);
  await page.locator('.term-status', { hasText: /^connected$/ }).waitFor({ timeout: 60_000 });
  const t = await timedTyping(page, ctx, { framing: [] });
  t.size = await page.evaluate(() => ({
    rows: document.querySelectorAll('.term-host .xterm-rows > div').length,
    screenWidth: document.querySelector('.term-host .xterm-screen').offsetWidth,
    cols: window.__term.cols,
  }));
  // The bridge's own records (see pty_bridge.py), of the bytes since the last call.
  t.take = async () => {
    bridge.stdin.write('take\n');
    return (await next()).records;
  };
  const close = t.close;
  t.close = async () => {
    await close();
    server.close();
    bridge.stdin.end();
    const timer = setTimeout(() => bridge.kill(), 15_000);
    await exited;
    clearTimeout(timer);
  };
  return t;
}

/** A page with a terminal connected: waits for the prompt and returns type(line) and close(). */
async function timedTyping(page, ctx, { framing = [0] } = {}) {
  await waitForText(page, 'a prompt', (t) => /[$#]\s*$/.test(lines(t).filter(Boolean).join('\n')));
  await page.locator('.term-host').first().click();
  // The prompt's row: the last row with text. Typing only ever changes that row.
  const prompt = await page.evaluate((framing) => {
    const rows = [...document.querySelector('.term-host .xterm-rows').children];
    const text = (r) => r.textContent.replace(/\u00a0/g, ' ').trimEnd();
    const at = rows.findLastIndex((r) => text(r) !== '');
    const rowText = () => text(document.querySelector('.term-host .xterm-rows').children[at]);
    window.__kb = {
      rowText,
      // Resolves with the times of the next keystroke once the row ends with `want`. With
      // `byte`, no key: the byte is written on the terminal's socket (as the page frames stdin:
      // after `framing`, the web's channel byte; nothing for the bridge) and the write counts
      // as the key's time.
      arm(want, byte) {
        const t = window.__kbTimes;
        const from = { down: t.down.length, sent: t.sent.length, recv: t.recv.length };
        const rowsEl = document.querySelector('.term-host .xterm-rows');
        this.result = new Promise((resolve, reject) => {
          const obs = new MutationObserver(() => {
            const shown = performance.now();
            if (t.down.length === from.down || !rowText().endsWith(want)) return;
            obs.disconnect();
            clearTimeout(timer);
            resolve({ down: t.down[from.down], sent: t.sent[from.sent], recv: t.recv[from.recv], shown });
          });
          obs.observe(rowsEl, { childList: true, subtree: true, characterData: true });
          const timer = setTimeout(() => {
            obs.disconnect();
            reject(new Error(`no echo of "${want}" within 10 s; the row shows "${rowText()}"`));
          }, 10_000);
        });
        if (byte !== undefined) {
          t.down.push(performance.now());
          window.__kbSocket.send(Uint8Array.of(...framing, byte));
        }
      },
    };
    return rowText();
  }, framing);
  return {
    prompt,
    // byScript: no key event, the characters written on the socket by a script in the page.
    async type(line, { byScript = false } = {}) {
      const out = [];
      for (let i = 0; i < line.length; i++) {
        if (byScript) {
          await page.evaluate(([want, byte]) => window.__kb.arm(want, byte), [line.slice(0, i + 1), line.charCodeAt(i)]);
        } else {
          await page.evaluate((want) => window.__kb.arm(want), line.slice(0, i + 1));
          await page.keyboard.press(line[i]);
        }
        out.push(await page.evaluate(() => window.__kb.result));
      }
      await page.keyboard.press('Control+u');
      await page.waitForFunction((p) => window.__kb.rowText() === p, prompt, { timeout: 10_000 });
      return out;
    },
    close: () => ctx.close(),
  };
}

/** `berth shell ws` under a pseudo-terminal (pty_echo.py); type(line) returns ms per character. */
async function openCliShell(cli, base, key, ws) {
  const proc = spawn('/usr/bin/python3', [path.join(here, 'pty_echo.py'), '--', cli, 'shell', ws], {
    env: { ...process.env, BERTH_URL: base, BERTH_API_KEY: key, TERM: 'xterm-256color' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const answers = readline.createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await answers.next();
    if (done) throw new Error(`pty_echo.py ended: ${stderr.trim()}`);
    return JSON.parse(value);
  };
  const ready = await next();
  return {
    prompt: ready.prompt,
    async type(line) {
      proc.stdin.write(`${line}\n`);
      return (await next()).ns.map((ns) => ns / 1e6);
    },
    async close() {
      proc.stdin.end();
      const exited = new Promise((resolve) => proc.once('exit', resolve));
      const timer = setTimeout(() => proc.kill(), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

async function keystrokeToEcho(browser, base, key, ws) {
  const web = await openWebTerminal(browser, base, key, ws);
  const cli = process.env.BERTH_CLI ? await openCliShell(process.env.BERTH_CLI, base, key, ws) : null;
  const xcli = process.env.BERTH_CLI ? await openCliXterm(browser, process.env.BERTH_CLI, base, key, ws, web.host) : null;
  log(`keystrokes in ${ws}: the web terminal's prompt "${web.prompt}"${cli ? `, berth shell's "${cli.prompt}", in xterm.js "${xcli.prompt}"` : ''}`);
  if (xcli) {
    log(`  xterm.js sizes: the web terminal ${web.host.rows} rows, screen ${web.host.screenWidth} px wide; berth shell's page ${xcli.size.rows} rows x ${xcli.size.cols} cols, ${xcli.size.screenWidth} px`);
    if (xcli.size.rows !== web.host.rows || xcli.size.screenWidth !== web.host.screenWidth) log('  NOTE: the two xterm.js terminals differ in size');
  }
  const webTimes = [];
  const scriptTimes = [];
  const cliTimes = [];
  const xcliTimes = [];
  const xscriptTimes = [];
  const bridge = [];
  const xscriptBridge = [];
  try {
    for (const line of typingLines(kWarmup)) {
      await web.type(line);
      await web.type(line, { byScript: true });
      if (cli) await cli.type(line);
      if (xcli) await xcli.type(line);
      if (xcli) await xcli.type(line, { byScript: true });
    }
    if (xcli) await xcli.take();
    const perRound = Math.ceil(kKeystrokes / kRounds);
    for (let r = 0, left = kKeystrokes; left > 0; r++, left -= perRound) {
      const round = typingLines(Math.min(perRound, left));
      const sides = [async () => { for (const l of round) webTimes.push(...await web.type(l)); },
                     async () => { for (const l of round) scriptTimes.push(...await web.type(l, { byScript: true })); },
                     async () => { if (cli) for (const l of round) cliTimes.push(...await cli.type(l)); },
                     async () => {
                       if (!xcli) return;
                       for (const l of round) xcliTimes.push(...await xcli.type(l));
                       bridge.push(...await xcli.take());
                     },
                     async () => {
                       if (!xcli) return;
                       for (const l of round) xscriptTimes.push(...await xcli.type(l, { byScript: true }));
                       xscriptBridge.push(...await xcli.take());
                     }];
      for (let k = 0; k < sides.length; k++) await sides[(r + k) % sides.length]();
    }
  } finally {
    await web.close();
    if (cli) await cli.close();
    if (xcli) await xcli.close();
  }
  return { web: webTimes, script: scriptTimes, cli: cliTimes, xcli: xcliTimes, bridge, xscript: xscriptTimes, xscriptBridge };
}

async function main() {
  const dist = path.join(root, 'web', 'dist');
  if (!fs.existsSync(path.join(dist, 'index.html'))) throw new Error(`${dist}/index.html is missing: build it (npm run build in web/)`);
  const berthd = await startBerthd({ config: { web_root: dist } });
  let browser = null;
  try {
    const me = (await berthd.api('GET', '/v1/me')).body;
    const raised = await berthd.api('PATCH', `/v1/tenants/${me.tenant.id}`,
                                    { limits: { workspaces: kWorkspaces + 10, vcpus: 4 * kWorkspaces, memory_mib: 8192 * kWorkspaces, disk_gib: 100 * kWorkspaces } });
    if (raised.status !== 200) throw new Error(`raising the tenant's limits: ${raised.status} ${JSON.stringify(raised.body)}`);
    const made = Date.now();
    const names = Array.from({ length: kWorkspaces }, (_, i) => `bench-${String(i).padStart(3, '0')}`);
    for (let i = 0; i < names.length; i += 8) {
      const answers = await Promise.all(names.slice(i, i + 8).map((name) =>
        berthd.api('POST', '/v1/workspaces', { name, labels: { bench: 'webui', group: `g${i % 5}` } })));
      for (const a of answers) if (a.status !== 201) throw new Error(`create: ${a.status} ${JSON.stringify(a.body)}`);
    }
    await waitFor(`${kWorkspaces} workspaces running`, async () => {
      const list = (await berthd.api('GET', '/v1/workspaces?limit=1000')).body.workspaces ?? [];
      return list.filter((w) => w.state === 'running').length === kWorkspaces;
    }, 600_000);
    log(`${kWorkspaces} workspaces created and running in ${((Date.now() - made) / 1000).toFixed(1)} s`);

    browser = await launchChromium();
    const load = await firstLoad(browser, berthd.url, berthd.key);
    for (const r of load.assets) if (r.bytes > 100) log(`  ${new URL(r.url).pathname}: ${kb(r.bytes)}${r.encoding ? ` (${r.encoding})` : ''}`);
    const total = sum(load.assets);
    const apiBytes = sum([...load.list, ...load.terminal].filter((r) => new URL(r.url).pathname.startsWith('/v1/')));

    const { cold, warm } = await timeToList(browser, berthd.url, berthd.key, kWorkspaces);
    // The floor: one GET of the list from Node (no browser, no rendering), same machine.
    const api = [];
    for (let i = 0; i < kRuns; i++) {
      const t = performance.now();
      const r = await fetch(`${berthd.url}/v1/workspaces?limit=1000`, { headers: { Authorization: `Bearer ${berthd.key}` } });
      const body = await r.json();
      if ((body.workspaces ?? []).length !== kWorkspaces) throw new Error('the API list is short');
      api.push(performance.now() - t);
    }
    const cli = [];
    if (process.env.BERTH_CLI) {
      for (let i = 0; i < kRuns; i++) {
        const t = performance.now();
        const r = spawnSync(process.env.BERTH_CLI, ['ls', '--url', berthd.url], { env: { ...process.env, BERTH_API_KEY: berthd.key }, encoding: 'utf8' });
        if (r.status !== 0) throw new Error(`berth ls: ${r.stderr}`);
        cli.push(performance.now() - t);
        if (i === 0 && (r.stdout.match(/bench-\d{3}/g) ?? []).length < kWorkspaces) throw new Error(`berth ls shows fewer than ${kWorkspaces}:\n${r.stdout.slice(0, 500)}`);
      }
    }

    // A workspace whose terminal page has not been opened: a fresh shell on both sides.
    const loadBefore = os.loadavg();
    const echo = await keystrokeToEcho(browser, berthd.url, berthd.key, names[names.length - 1]);
    const webMs = echo.web.map((t) => t.shown - t.down);
    const scriptMs = echo.script.map((t) => t.shown - t.down);
    const xcliMs = echo.xcli.map((t) => t.shown - t.down);
    const part = (from, to, list = echo.web) => pct(list.map((t) => t[to] - t[from]), 50);
    const webP50 = pct(webMs, 50);
    const cliP50 = echo.cli.length ? pct(echo.cli, 50) : null;
    const gap = cliP50 === null ? null : webP50 - cliP50;
    const xcliP50 = xcliMs.length ? pct(xcliMs, 50) : null;
    const xgap = xcliP50 === null ? null : webP50 - xcliP50;
    const xscriptMs = echo.xscript.map((t) => t.shown - t.down);
    // The bridge's records, one per measured keystroke of its sides, in order (pty_bridge.py).
    const own = (recs) => recs.map((r) => (r.in_to_write + r.read_to_sent) / 1e6);
    const trip = (recs) => recs.map((r) => r.write_to_read / 1e6);
    // The page's send to the echo's frame, less `berth shell`'s round trip at the bridge's pty.
    // Without a key event, what the bridge adds (its own work, its WebSocket on loopback,
    // Chromium's socket); after a key, Chromium's holding of the frame as well.
    const rest = (times, recs) => (times.length === recs.length ? times.map((t, i) => (t.recv - t.sent) - recs[i].write_to_read / 1e6) : null);
    const keyRest = rest(echo.xcli, echo.bridge);
    const scriptRest = rest(echo.xscript, echo.xscriptBridge);
    const signed = (x) => `${x >= 0 ? '+' : ''}${x.toFixed(1)} ms`;
    log(`keystroke to echo, web terminal: p50 ${ms(webP50)}, p90 ${ms(pct(webMs, 90))}, p99 ${ms(pct(webMs, 99))} (${webMs.length} keystrokes)`);
    log(`  the web's parts at p50: key to WebSocket send ${ms(part('down', 'sent'))}, send to the echo's frame ${ms(part('sent', 'recv'))}, frame to the rows ${ms(part('recv', 'shown'))}`);
    log(`keystroke to echo, the same page without a key event (the socket written by a script): p50 ${ms(pct(scriptMs, 50))}; `
        + `write to the echo's frame ${ms(part('sent', 'recv', echo.script))}, frame to the rows ${ms(part('recv', 'shown', echo.script))}`);
    if (gap !== null) {
      log(`keystroke to echo, berth shell in a pty: p50 ${ms(cliP50)}, p90 ${ms(pct(echo.cli, 90))}, p99 ${ms(pct(echo.cli, 99))} (${echo.cli.length} keystrokes)`);
      log(`keystroke to echo, berth shell drawn by xterm.js (pty bridge): p50 ${ms(xcliP50)}, p90 ${ms(pct(xcliMs, 90))}, p99 ${ms(pct(xcliMs, 99))} (${xcliMs.length} keystrokes); `
          + `key to send ${ms(part('down', 'sent', echo.xcli))}, send to the echo's frame ${ms(part('sent', 'recv', echo.xcli))}, frame to the rows ${ms(part('recv', 'shown', echo.xcli))}`);
      log(`  the same page without a key event: p50 ${ms(pct(xscriptMs, 50))}; write to the echo's frame ${ms(part('sent', 'recv', echo.xscript))}, frame to the rows ${ms(part('recv', 'shown', echo.xscript))}`);
      log(`  the bridge: pty write to read p50 ${ms(pct(trip(echo.bridge), 50))} (key) and ${ms(pct(trip(echo.xscriptBridge), 50))} (script); its own work p50 ${ms(pct(own([...echo.bridge, ...echo.xscriptBridge]), 50))}; `
          + `send to frame less the pty round trip p50 ${keyRest ? ms(pct(keyRest, 50)) : '(records not paired)'} (key), ${scriptRest ? ms(pct(scriptRest, 50)) : '(records not paired)'} (script: the bridge's path)`);
      log(`keystroke to echo at p50: web - (berth shell in xterm.js) ${signed(xgap)}, like for like; web - (berth shell at the pty) ${signed(gap)} (target <= +${kTargetEchoMs} ms)`);
    }

    const rows = [
      ['first load: the sign-in page (HTML, JS, CSS, icon)', kb(sum(load.signin)), '', ''],
      ['first load: the Desktop tab\'s noVNC chunk', kb(sum(load.desktop)), '', ''],
      ['first load: everything, to a terminal and the desktop (xterm.js and noVNC)', kb(total), kb(kTargetBytes), `${(total / kTargetBytes).toFixed(2)}x of the target`],
      ['API answers on the way (session, processes; the list event stream not counted)', kb(apiBytes), '', ''],
      [`${kWorkspaces} workspaces shown, first visit (nothing cached), median of ${kRuns}`, `${median(cold).toFixed(0)} ms`,
        `${median(api).toFixed(1)} ms (GET /v1/workspaces from Node)`, `${(median(cold) / median(api)).toFixed(1)}x`],
      [`${kWorkspaces} workspaces shown, reload (assets cached), median of ${kRuns}`, `${median(warm).toFixed(0)} ms`,
        cli.length ? `${median(cli).toFixed(0)} ms (\`berth ls\`, a whole process)` : '', cli.length ? `${(median(warm) / median(cli)).toFixed(2)}x` : ''],
      [`keystroke to echo, web terminal, p50 of ${webMs.length}${gap === null ? '' : ', like for like'}`, ms(webP50),
        gap === null ? '' : `${ms(xcliP50)} (\`berth shell\` drawn by xterm.js in the same Chromium)`, gap === null ? '' : `${signed(xgap)} (target <= +${kTargetEchoMs} ms)`],
      ...(gap === null ? [] : [[`keystroke to echo, web terminal, p50 of ${webMs.length}, harsher`, ms(webP50), `${ms(cliP50)} (\`berth shell\` in a pty, no terminal drawing)`, signed(gap)]]),
    ];
    const table = ['| measure | value | against | ratio |', '|---|---|---|---|', ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
    const echoRows = [
      ['web terminal: keydown to the character in xterm.js\'s rows', ...[50, 90, 99].map((p) => ms(pct(webMs, p)))],
      ['  of which: keydown to the WebSocket send', ...[50, 90, 99].map((p) => ms(pct(echo.web.map((t) => t.sent - t.down), p)))],
      ['  of which: send to the echo\'s frame received', ...[50, 90, 99].map((p) => ms(pct(echo.web.map((t) => t.recv - t.sent), p)))],
      ['  of which: frame received to the rows changed', ...[50, 90, 99].map((p) => ms(pct(echo.web.map((t) => t.shown - t.recv), p)))],
      ['the same page, no key event: the byte written on the socket by a script, to the rows changed', ...[50, 90, 99].map((p) => ms(pct(scriptMs, p)))],
      ['  of which: write to the echo\'s frame received', ...[50, 90, 99].map((p) => ms(pct(echo.script.map((t) => t.recv - t.sent), p)))],
      ['  of which: frame received to the rows changed', ...[50, 90, 99].map((p) => ms(pct(echo.script.map((t) => t.shown - t.recv), p)))],
      ...(gap === null ? [] : [
        ['`berth shell` drawn by xterm.js in the same Chromium (local pty bridge): keydown to the character in xterm.js\'s rows', ...[50, 90, 99].map((p) => ms(pct(xcliMs, p)))],
        ['  of which: keydown to the WebSocket send', ...[50, 90, 99].map((p) => ms(pct(echo.xcli.map((t) => t.sent - t.down), p)))],
        ['  of which: send to the echo\'s frame received', ...[50, 90, 99].map((p) => ms(pct(echo.xcli.map((t) => t.recv - t.sent), p)))],
        ['    of that, at the bridge: pty write to the echo\'s pty read (`berth shell`\'s round trip)', ...[50, 90, 99].map((p) => ms(pct(trip(echo.bridge), p)))],
        ...(keyRest ? [['    of that, the rest: the bridge\'s path and Chromium holding the frame after a key', ...[50, 90, 99].map((p) => ms(pct(keyRest, p)))]] : []),
        ['  of which: frame received to the rows changed', ...[50, 90, 99].map((p) => ms(pct(echo.xcli.map((t) => t.shown - t.recv), p)))],
        ['the same page, no key event: the byte written on the socket by a script, to the rows changed', ...[50, 90, 99].map((p) => ms(pct(xscriptMs, p)))],
        ['  of which: write to the echo\'s frame received', ...[50, 90, 99].map((p) => ms(pct(echo.xscript.map((t) => t.recv - t.sent), p)))],
        ['    of that, at the bridge: pty write to the echo\'s pty read', ...[50, 90, 99].map((p) => ms(pct(trip(echo.xscriptBridge), p)))],
        ...(scriptRest ? [['    of that, the rest: what the bridge adds (its WebSocket on loopback, Python, Chromium\'s socket)', ...[50, 90, 99].map((p) => ms(pct(scriptRest, p)))]] : []),
        ['  of which: frame received to the rows changed', ...[50, 90, 99].map((p) => ms(pct(echo.xscript.map((t) => t.shown - t.recv), p)))],
        ['the bridge\'s own work per keystroke (message in to pty write, pty read to message sent; both sides)', ...[50, 90, 99].map((p) => ms(pct(own([...echo.bridge, ...echo.xscriptBridge]), p)))],
        ['`berth shell` in a pty: byte written to byte read back (no terminal drawing)', ...[50, 90, 99].map((p) => ms(pct(echo.cli, p)))],
        ['web - (`berth shell` in xterm.js): like for like', ...[50, 90, 99].map((p) => signed(pct(webMs, p) - pct(xcliMs, p)))],
        ['web - `berth shell` at the pty: the harsher comparison', ...[50, 90, 99].map((p) => signed(pct(webMs, p) - pct(echo.cli, p)))],
      ]),
    ];
    const echoTable = [`| keystroke to echo (${webMs.length} keystrokes a side, alternating rounds) | p50 | p90 | p99 |`, '|---|---|---|---|',
                       ...echoRows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
    const extra = [
      `- cold runs (ms): ${cold.map((x) => x.toFixed(0)).join(', ')}; reloads: ${warm.map((x) => x.toFixed(0)).join(', ')}; API: ${api.map((x) => x.toFixed(1)).join(', ')}${cli.length ? `; berth ls: ${cli.map((x) => x.toFixed(0)).join(', ')}` : ''}`,
      `- JS/CSS sent without gzip: ${load.unzipped.length ? load.unzipped.map((r) => new URL(r.url).pathname).join(', ') : 'none'}`,
      `- load average before the keystrokes: ${loadBefore.map((x) => x.toFixed(2)).join(' ')}; at the end: ${os.loadavg().map((x) => x.toFixed(2)).join(' ')} (${os.cpus().length} cores)`,
    ].join('\n');
    const out = `${table}\n\n${echoTable}\n\n${extra}\n`;
    fs.mkdirSync(path.dirname(opts.out), { recursive: true });
    fs.writeFileSync(opts.out, out);
    console.log(out);
    if (gap !== null) {
      const verdict = (x) => (x <= kTargetEchoMs ? 'met' : `not met, ${(x - kTargetEchoMs).toFixed(1)} ms over`);
      console.log(`Keystroke to echo, target web <= \`berth shell\` + ${kTargetEchoMs} ms at p50:\n`
        + `- like for like, both drawn by the same xterm.js (${'same version, options and DOM renderer'}) in the same Chromium: web - (berth shell in xterm.js) ${signed(xgap)}: ${verdict(xgap)}.\n`
        + `- harsher, berth shell's echo read at its pty with no terminal emulator drawing it (every real terminal draws on its own frames): web - berth shell ${signed(gap)}: ${verdict(gap)}.`);
    }
    if (total > kTargetBytes) console.log(`NOTE: the first load (${kb(total)}) is over the ${kb(kTargetBytes)} target`);
  } finally {
    if (browser) await browser.close().catch(() => {});
    await berthd.stop();
  }
}

await main();
