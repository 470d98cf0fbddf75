#!/usr/bin/env node
// Opens a dev server's page in headless Chromium and checks that an edit reaches it through
// hot module replacement, not a reload. The browser half of the preview e2e test (issue 13);
// tests/support/vite_preview.py drives it.
//
//   node preview_hmr.mjs URL MARKER_OLD MARKER_NEW [--load-timeout S] [--hmr-timeout S]
//                        [--stdin-timeout S] [--map-to-loopback HOST_PATTERN]...
//
// --map-to-loopback makes Chromium resolve the names matching HOST_PATTERN
// (`*.preview.example.com`) to 127.0.0.1: a custom preview domain checked with no DNS.
//
// 1. Opens URL (redirects followed, cookies kept: a preview may answer 303 to take
//    `?berth_preview_token=` out of the address and set a cookie) and waits, at most
//    --load-timeout (60 s), for the page to contain MARKER_OLD.
// 2. Sets window.__berthNoReload to a random value and prints one JSON line
//    {"ready": true, "final_url": ..., ...} on stdout.
// 3. Waits for a line on stdin (the caller edits the app's file meanwhile), at most
//    --stdin-timeout (600 s).
// 4. Waits, at most --hmr-timeout (60 s), for MARKER_NEW, then prints one JSON line with the
//    outcome and exits 0 only when the new marker showed up, the sentinel survived (no reload,
//    no navigation), an HMR "update" arrived over a WebSocket and the page logged no error.
//    Otherwise the line says why ("error") and the exit status is 1. A failure before step 2
//    prints one line with "ready": false and exits 1.
//
// "The page contains M" means: M is in the rendered text (document.body.innerText) or in a CSS
// rule the page has applied (its CSSOM). The second is what a stock Vite app can show without
// a reload: its CSS is the only HMR-accepting module (see tests/e2e/preview/README.md), so the
// test appends `#app::after { content: "MARKER_NEW" }` to src/style.css, which the browser then
// also renders as text.
//
// The browser is Debian's /usr/bin/chromium (or $BERTH_CHROMIUM) through playwright-core,
// which downloads no browser of its own. Messages for people go to stderr.
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';

import { chromium } from 'playwright-core';

const kMaxListed = 20;      // console errors, WebSocket URLs, frames: enough to diagnose, bounded
const kMaxTextChars = 500;  // of any one message or page snippet

function fail(message) {
  process.stderr.write(`preview_hmr: ${message}\n`);
  process.exit(1);
}

function clip(text) {
  const s = String(text).replace(/\u001b\[[0-9;]*m/g, '');  // Playwright's call logs are coloured
  return s.length > kMaxTextChars ? `${s.slice(0, kMaxTextChars)}…` : s;
}

function pushBounded(list, item) {
  if (list.length < kMaxListed) list.push(item);
}

function parseCommandLine() {
  let parsed;
  try {
    parsed = parseArgs({
      allowPositionals: true,
      options: {
        'load-timeout': { type: 'string', default: '60' },
        'hmr-timeout': { type: 'string', default: '60' },
        'stdin-timeout': { type: 'string', default: '600' },
        'map-to-loopback': { type: 'string', multiple: true, default: [] },
      },
    });
  } catch (e) {
    fail(e.message);
  }
  const { positionals, values } = parsed;
  if (positionals.length !== 3 || positionals.some((p) => p === '')) {
    fail('usage: preview_hmr.mjs URL MARKER_OLD MARKER_NEW [--load-timeout S] [--hmr-timeout S] [--stdin-timeout S] [--map-to-loopback HOST_PATTERN]...');
  }
  const seconds = (name) => {
    const v = Number(values[name]);
    if (!Number.isFinite(v) || v <= 0 || v > 3600) fail(`--${name} must be 1..3600 seconds, not '${values[name]}'`);
    return v * 1000;
  };
  const [url, markerOld, markerNew] = positionals;
  if (markerOld === markerNew) fail('MARKER_OLD and MARKER_NEW must differ');
  for (const pattern of values['map-to-loopback']) {
    if (!/^[A-Za-z0-9*.-]+$/.test(pattern)) fail(`--map-to-loopback takes a host name pattern, not '${pattern}'`);
  }
  return {
    mapToLoopback: values['map-to-loopback'],
    url, markerOld, markerNew,
    loadMs: seconds('load-timeout'), hmrMs: seconds('hmr-timeout'), stdinMs: seconds('stdin-timeout'),
  };
}

// Runs in the page: where the marker is, 'text' or 'css', or null.
function findMarker(marker) {
  if (document.body && document.body.innerText.includes(marker)) return 'text';
  for (const sheet of document.styleSheets) {
    let rules;
    try {
      rules = sheet.cssRules;
    } catch {
      continue;  // a cross-origin sheet: not the app's
    }
    for (const rule of rules) {
      if (rule.cssText.includes(marker)) return 'css';
    }
  }
  return null;
}

// One line from stdin within ms: true for a line, false on EOF; rejects on timeout.
function readLine(ms) {
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: process.stdin });
    const timer = setTimeout(() => {
      rl.close();
      reject(new Error(`no line on stdin within ${ms / 1000} s`));
    }, ms);
    let done = false;
    rl.once('line', () => {
      done = true;
      clearTimeout(timer);
      rl.close();
      resolve(true);
    });
    rl.once('close', () => {
      clearTimeout(timer);
      if (!done) resolve(false);
    });
  });
}

// What the page did, gathered from Playwright's events as they happen.
class PageLog {
  constructor(page) {
    this.consoleErrors = [];
    this.ignoredErrors = [];
    this.websockets = [];  // {url, received, sent, closed, types}
    this.mainFrameNavigations = 0;
    page.on('console', (m) => {
      // "Failed to load resource" names no URL in its text: its location does.
      const where = m.location() && m.location().url ? ` (${m.location().url})` : '';
      if (m.type() !== 'error') return;
      // The browser's own /favicon.ico request (a page without an icon link, such as a
      // "waking" page) is not the app's error: listed apart, not counted.
      const list = /\/favicon\.ico$/.test(where.slice(2, -1)) ? this.ignoredErrors : this.consoleErrors;
      pushBounded(list, clip(`${m.text()}${where}`));
    });
    page.on('pageerror', (e) => pushBounded(this.consoleErrors, clip(`uncaught: ${e.message}`)));
    page.on('framenavigated', (f) => {
      if (f === page.mainFrame()) this.mainFrameNavigations += 1;
    });
    page.on('websocket', (ws) => {
      const entry = { url: ws.url(), received: 0, sent: 0, closed: false, types: [] };
      if (this.websockets.length < kMaxListed) this.websockets.push(entry);
      ws.on('framereceived', ({ payload }) => {
        entry.received += 1;
        // Vite's HMR messages are JSON objects with a "type": connected, update, full-reload…
        try {
          const type = JSON.parse(String(payload)).type;
          if (typeof type === 'string') pushBounded(entry.types, type);
        } catch {
          // not JSON: counted only
        }
      });
      ws.on('framesent', () => { entry.sent += 1; });
      ws.on('close', () => { entry.closed = true; });
    });
  }

  sawHmrUpdate() {
    return this.websockets.some((w) => w.types.includes('update'));
  }

  // Vite greets each HMR client with {"type":"connected"}; an update sent before that socket
  // is open goes to no one (Vite keeps no backlog).
  hmrConnected() {
    return this.websockets.some((w) => !w.closed && w.types.includes('connected'));
  }
}

async function pageSnippet(page) {
  try {
    return clip(await page.evaluate(() => (document.body ? document.body.innerText : '')));
  } catch {
    return '';
  }
}

async function cookieSummary(context, url) {
  // Names and attributes only: a value may be a preview token.
  const cookies = await context.cookies(url);
  return cookies.map((c) => ({ name: c.name, httpOnly: c.httpOnly, sameSite: c.sameSite, secure: c.secure, domain: c.domain }));
}

function emit(obj) {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

async function main() {
  const argv = parseCommandLine();
  const executablePath = process.env.BERTH_CHROMIUM || '/usr/bin/chromium';
  // Chromium refuses to start as root with its sandbox on ("Running as root without
  // --no-sandbox is not supported"), and CI runs as root; as any other user it keeps it.
  const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  let browser;
  try {
    // --map-to-loopback: a custom preview domain without DNS (*.localhost needs none).
    const args = [];
    if (argv.mapToLoopback.length > 0) {
      args.push(`--host-resolver-rules=${argv.mapToLoopback.map((p) => `MAP ${p} 127.0.0.1`).join(', ')}`);
    }
    browser = await chromium.launch({ executablePath, headless: true, chromiumSandbox: !asRoot, args, timeout: 60000 });
  } catch (e) {
    emit({ ready: false, ok: false, error: `cannot launch ${executablePath}: ${clip(e.message)}` });
    return 1;
  }
  try {
    return await run(browser, argv);
  } finally {
    await browser.close();
  }
}

async function run(browser, args) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const log = new PageLog(page);
  const result = { ready: false, ok: false, url: args.url };

  // 1. The page, with the old marker.
  let response;
  try {
    response = await page.goto(args.url, { waitUntil: 'domcontentloaded', timeout: args.loadMs });
  } catch (e) {
    emit({ ...result, error: `cannot open ${args.url}: ${clip(e.message)}` });
    return 1;
  }
  result.final_url = page.url();
  result.status = response ? response.status() : null;
  result.redirects = [];
  for (let r = response && response.request().redirectedFrom(); r; r = r.redirectedFrom()) {
    result.redirects.unshift(r.url());
  }
  try {
    await page.waitForFunction(findMarker, args.markerOld, { timeout: args.loadMs, polling: 250 });
  } catch {
    emit({
      ...result, error: `the page never contained '${args.markerOld}' within ${args.loadMs / 1000} s`,
      page_text: await pageSnippet(page), console_errors: log.consoleErrors, websockets: log.websockets,
    });
    return 1;
  }
  // A dev server's page (it loads Vite's client) is ready only once its HMR socket is open
  // through the proxy: under a loaded TCG guest that can be seconds after the page shows, and an
  // edit before then is an update nobody receives. A static page has no socket to wait for.
  const devPage = await page.evaluate(() => !!document.querySelector('script[src*="@vite/client"]'));
  const hmrBy = Date.now() + args.loadMs;
  while (devPage && !log.hmrConnected() && Date.now() < hmrBy) await new Promise((r) => setTimeout(r, 100));
  if (devPage && !log.hmrConnected()) {
    emit({
      ...result, error: `Vite's HMR WebSocket did not connect through the preview within ${args.loadMs / 1000} s`,
      page_text: await pageSnippet(page), console_errors: log.consoleErrors, websockets: log.websockets,
    });
    return 1;
  }
  // 2. The sentinel a reload would lose; the navigations counted from here on.
  const sentinel = randomBytes(16).toString('hex');
  await page.evaluate((v) => { window.__berthNoReload = v; }, sentinel);
  const navigationsAtReady = log.mainFrameNavigations;
  result.final_url = page.url();
  result.ready = true;
  result.cookies = await cookieSummary(context, result.final_url);
  emit({ ready: true, final_url: result.final_url, status: result.status, redirects: result.redirects, cookies: result.cookies });

  // 3. The caller edits the file.
  let gotLine;
  try {
    gotLine = await readLine(args.stdinMs);
  } catch (e) {
    emit({ ...result, error: e.message });
    return 1;
  }
  if (!gotLine) {
    emit({ ...result, error: 'stdin closed before the line that says the file was edited' });
    return 1;
  }

  // 4. The new marker, and how it came.
  const t0 = Date.now();
  result.saw_new = false;
  try {
    const where = await page.waitForFunction(findMarker, args.markerNew, { timeout: args.hmrMs, polling: 100 });
    result.saw_new = true;
    result.saw_new_in = await where.jsonValue();
    result.hmr_ms = Date.now() - t0;
  } catch {
    // saw_new stays false; reported below
  }
  let kept = null;
  try {
    kept = await page.evaluate(() => window.__berthNoReload);
  } catch {
    // the page is gone or navigating: a reload
  }
  result.reloaded = kept !== sentinel || log.mainFrameNavigations !== navigationsAtReady;
  result.navigations_after_ready = log.mainFrameNavigations - navigationsAtReady;
  result.final_url = page.url();
  result.hmr_update_over_websocket = log.sawHmrUpdate();
  result.console_errors = log.consoleErrors;
  result.ignored_console_errors = log.ignoredErrors;
  result.websockets = log.websockets;

  const problems = [];
  if (!result.saw_new) problems.push(`'${args.markerNew}' never appeared within ${args.hmrMs / 1000} s`);
  if (result.reloaded) problems.push('the page reloaded (the sentinel or the main frame changed): not HMR');
  if (!result.hmr_update_over_websocket) problems.push('no HMR "update" message arrived over a WebSocket');
  if (result.console_errors.length > 0) problems.push(`the page logged ${result.console_errors.length} error(s)`);
  result.ok = problems.length === 0;
  if (!result.ok) {
    result.error = problems.join('; ');
    result.page_text = await pageSnippet(page);
  }
  emit(result);
  process.stderr.write(`preview_hmr: ${result.ok ? 'ok' : `FAILED: ${result.error}`}\n`);
  return result.ok ? 0 : 1;
}

main().then((code) => process.exit(code), (e) => fail(e && e.stack ? e.stack : String(e)));
