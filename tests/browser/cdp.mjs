// The desktop's DevTools tunnel (issue 14): Playwright's connectOverCDP through berthd's
// `…/desktop/cdp`, with the API key in a header, to a real Chromium. berthd runs on
// --transport unix with real agents as host processes, so the agent's tunnel to the guest's
// DevTools port reaches this host's loopback: the test starts Debian's Chromium there with
// --remote-debugging-port on a free port and tells berthd (desktop.cdp_port).
//
// Proves: discovery JSON points at berthd and carries no guest front-end URL; a page opened
// through the tunnel reads its title and is clicked (a page that records clicks proves it);
// while a person holds control, title() and screenshot() still work, page.mouse.click() fails with
// berthd's error naming the holder and page.click() fails at its timeout, and the page records no click; after the hand-back the
// click works; a private takeover closes the tunnel and a new connection gets 423; after the
// hand-back the browser target's WebSocket (…/desktop/cdp itself) connects again; no key: 401;
// the timeline has the tunnel's opening and its refused calls. Exit 0 PASS, 1 FAIL.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

import { chromium } from 'playwright-core';

import { startBerthd } from '../../sdk/typescript/test/harness.mjs';
import { Failure, check } from './webui_lib.mjs';

const T = 'integration_desktop_cdp';
const log = (m) => process.stderr.write(`${T}: ${m}\n`);

async function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// Debian's Chromium with its DevTools on 127.0.0.1:port, as the desktop image starts it.
async function startGuestChrome(port, dir) {
  const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const args = ['--headless=new', `--remote-debugging-port=${port}`, '--remote-debugging-address=127.0.0.1',
                `--user-data-dir=${dir}`, '--no-first-run', '--no-default-browser-check', '--disable-gpu',
                '--window-size=1280,800', 'about:blank'];
  if (asRoot) args.unshift('--no-sandbox');
  // Its own process group: the test ends Chromium's helpers (zygote, renderers) with it.
  const proc = spawn(process.env.BERTH_CHROMIUM || '/usr/bin/chromium', args, { stdio: 'ignore', detached: true });
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/json/version`);
      if (r.ok) return proc;
    } catch {}
    await new Promise((r) => setTimeout(r, 200));
  }
  process.kill(-proc.pid, 'SIGKILL');
  throw new Failure('the guest-side Chromium did not open its DevTools port');
}

const kPage = `<!doctype html><title>berth-cdp-page</title>
<button id="b" style="position:absolute;left:40px;top:40px;width:200px;height:80px">press</button>
<script>window.clicks = 0; document.getElementById('b').addEventListener('click', () => { window.clicks++; });</script>`;

async function main() {
  const cdpPort = await freePort();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-cdp-'));
  const guestChrome = await startGuestChrome(cdpPort, path.join(tmp, 'profile'));
  const berthd = await startBerthd({ config: { desktop: { cdp_port: cdpPort } } });
  const auth = { Authorization: `Bearer ${berthd.key}` };
  let browser = null;
  let failed = null;
  try {
    const made = await berthd.api('POST', '/v1/workspaces', { name: 'cdp' });
    check(made.status === 201 || made.status === 202, `create: ${made.status} ${JSON.stringify(made.body)}`);
    const ws = made.body.id;
    const endpoint = `${berthd.url}/v1/workspaces/${ws}/desktop/cdp`;

    // No key: refused before anything reaches the guest.
    const anon = await fetch(`${endpoint}/json/version`);
    check(anon.status === 401, `discovery without a key: ${anon.status}`);

    // Discovery: pointed at berthd, nothing of the guest's front end.
    const version = await fetch(`${endpoint}/json/version/`, { headers: auth });
    const vbody = await version.json();
    check(version.status === 200, `json/version: ${version.status} ${JSON.stringify(vbody)}`);
    const host = new URL(berthd.url).host;
    check(vbody.webSocketDebuggerUrl?.startsWith(`ws://${host}/v1/workspaces/${ws}/desktop/cdp/devtools/browser/`),
          `json/version's webSocketDebuggerUrl: ${vbody.webSocketDebuggerUrl}`);
    const list = await (await fetch(`${endpoint}/json/list`, { headers: auth })).json();
    check(Array.isArray(list) && list.length >= 1 && list.every((t) => !('devtoolsFrontendUrl' in t)),
          `json/list: ${JSON.stringify(list).slice(0, 300)}`);
    log(`discovery: ${vbody.Browser}, ${list.length} target(s), URLs at berthd`);

    // Playwright through the tunnel: a page, its title, a click that the page records.
    browser = await chromium.connectOverCDP(endpoint, { headers: auth, timeout: 60_000 });
    const context = browser.contexts()[0];
    const page = await context.newPage();
    await page.goto(`data:text/html,${encodeURIComponent(kPage)}`);
    check(await page.title() === 'berth-cdp-page', 'the page title through the tunnel');
    await page.click('#b', { timeout: 10_000 });
    check(await page.evaluate(() => window.clicks) === 1, 'the agent\'s click did not reach the page');
    log('connectOverCDP: title read, click recorded');

    // A person takes over: reads pass, the click is refused by berthd and never reaches the page.
    const taken = await berthd.api('POST', `/v1/workspaces/${ws}/desktop/control/takeover`, { reason: 'a login' });
    check(taken.status === 200 && taken.body.holder === 'human', `takeover: ${taken.status} ${JSON.stringify(taken.body)}`);
    check(await page.title() === 'berth-cdp-page', 'title() during a takeover');
    const png = await page.screenshot();
    check(png.length > 100 && png.subarray(1, 4).toString() === 'PNG', 'screenshot() during a takeover');
    // page.mouse fails at once with berthd's answer; a locator's click (Playwright retries every
    // protocol error while it auto-waits) fails at its timeout; neither reaches the page.
    const refused = await page.mouse.click(100, 60).then(() => null, (e) => e.message);
    check(refused !== null, 'page.mouse.click() during a takeover did not fail');
    check(/a person \(key_[0-9a-f]+\) has held the desktop since/.test(refused),
          `page.mouse.click() during a takeover fails with: ${refused.split('\n')[0]}`);
    const located = await page.click('#b', { timeout: 3000 }).then(() => null, (e) => e.message);
    check(located !== null, 'page.click() during a takeover did not fail');
    check(await page.evaluate(() => window.clicks) === 1, 'a click reached the page during the takeover');
    log(`during takeover: title and screenshot work; clicks refused: ${refused.split('\n')[0].slice(0, 160)}`);

    const released = await berthd.api('POST', `/v1/workspaces/${ws}/desktop/control/release`, { note: 'logged in' });
    check(released.status === 200 && released.body.holder === 'agent', `release: ${released.status}`);
    // The hand-back's summary: Chrome's tabs as the person found and left them.
    const back = released.body.handback ?? {};
    check(back.note === 'logged in', `the hand-back's note: ${JSON.stringify(back)}`);
    for (const when of ['tabs_before', 'tabs_after']) {
      check(Array.isArray(back[when]) && back[when].some((t) => t.title === 'berth-cdp-page' && t.url.startsWith('data:text/html')),
            `the hand-back's ${when}: ${JSON.stringify(back[when])}`);
    }
    await page.click('#b', { timeout: 10_000 });
    check(await page.evaluate(() => window.clicks) === 2, 'the click after the hand-back did not reach the page');
    log('after release: click recorded');

    // A private takeover closes the tunnel; a new connection is refused with 423.
    const disconnected = new Promise((resolve) => browser.once('disconnected', resolve));
    const priv = await berthd.api('POST', `/v1/workspaces/${ws}/desktop/control/takeover`, { private: true });
    check(priv.status === 200 && priv.body.private === true, `private takeover: ${priv.status} ${JSON.stringify(priv.body)}`);
    const titleDuringPrivate = await page.evaluate(() => document.title).then(() => 'answered', (e) => e.message);
    check(titleDuringPrivate !== 'answered', 'title() was answered during a private takeover');
    await Promise.race([disconnected, new Promise((_, reject) => setTimeout(() => reject(new Failure('the tunnel stayed open during a private takeover')), 15_000))]);
    const locked = await fetch(`${endpoint}/json/version`, { headers: auth });
    check(locked.status === 423, `discovery during a private takeover: ${locked.status}`);
    log('private takeover: the tunnel closed, a new connection gets 423');
    browser = null;

    await berthd.api('POST', `/v1/workspaces/${ws}/desktop/control/release`, {});
    // The browser target's own WebSocket, …/desktop/cdp with no discovery first.
    const wsUrl = endpoint.replace(/^http/, 'ws');
    browser = await chromium.connectOverCDP(wsUrl, { headers: auth, timeout: 60_000 });
    const pages = browser.contexts()[0].pages();
    const again = pages.find((p) => p.url().startsWith('data:text/html'));
    check(again !== undefined, `the page is still in Chrome after reconnecting (pages: ${pages.map((p) => p.url().slice(0, 40))})`);
    check(await again.evaluate(() => window.clicks) === 2, 'the page lost its state');
    log('after the private hand-back: …/desktop/cdp connects again and finds the page');
    await browser.close().catch(() => {});
    browser = null;

    // The timeline: the tunnel's connections and the refused call.
    const events = await berthd.api('GET', `/v1/workspaces/${ws}/events?limit=200`);
    const types = (events.body.events ?? []).map((e) => e.type);
    check(types.includes('desktop_cdp_opened'), `no desktop_cdp_opened event: ${types}`);
    const closed = (events.body.events ?? []).filter((e) => e.type === 'desktop_cdp_closed');
    check(closed.some((e) => e.data?.refused >= 1), `no desktop_cdp_closed event counts the refused click: ${JSON.stringify(closed)}`);
  } catch (e) {
    failed = e;
  } finally {
    if (browser) await browser.close().catch(() => {});
    await berthd.stop();
    const exited = new Promise((r) => (guestChrome.exitCode !== null ? r() : guestChrome.once('exit', r)));
    process.kill(-guestChrome.pid, 'SIGKILL');
    await exited;
    fs.rmSync(tmp, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  }
  if (failed) {
    console.log(`FAIL ${T}: ${failed instanceof Failure ? failed.message : failed.stack}`);
    process.exit(1);
  }
  console.log(`PASS ${T}`);
}

main().catch((e) => {
  console.log(`FAIL ${T}: ${e.stack}`);
  process.exit(1);
});
