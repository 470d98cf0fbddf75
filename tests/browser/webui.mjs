#!/usr/bin/env node
// The web UI (web/, issue 15) in Debian's Chromium against a real berthd on --transport unix
// (each workspace's agent is a real berth-agent host process; no VM): berthd serves web/dist
// from its `web_root` and the page signs in with the operator key.
//
//   BERTHD_BIN=… BERTH_AGENT_BIN=… node webui.mjs [--screenshots DIR]
//
// Checks, in order: signed out, the page shows only the sign-in form and the API answers 401;
// a wrong key shows berthd's message; sign in; create a workspace and see it reach running
// without a reload; `echo hi` in the terminal prints hi; after a reload the same terminal
// shows it again and its prompt still works; upload a file, see it listed, download it back
// byte-identical; the timeline shows the workspace's events; a state-changing request without
// the CSRF header is refused (403); signed out, the old cookie no longer reaches the API.
// No CSP violation or uncaught error on any page. Screenshots of each page at 1366x768 and
// 390x844 go to --screenshots (CTest: build/Testing/webui-screenshots). Exit 0 PASS, 1 FAIL.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { chromium } from 'playwright-core';

import { startBerthd, waitFor } from '../../sdk/typescript/test/harness.mjs';

const T = 'integration_webui';
const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const kStep = 60_000;  // any one step; a workspace on --transport unix is running in a second or two

const { values: opts } = parseArgs({ options: { screenshots: { type: 'string', default: path.join(root, 'build', 'Testing', 'webui-screenshots') } } });

function log(m) {
  process.stderr.write(`${T}: ${m}\n`);
}

class Failure extends Error {}
function check(ok, what) {
  if (!ok) throw new Failure(what);
}

const kViewports = { laptop: { width: 1366, height: 768 }, phone: { width: 390, height: 844 } };

// Uncaught errors and CSP refusals on any page fail the test.
// xterm.js writes its CSS into <style> elements; under a CSP without 'unsafe-inline' for styles
// the page mirrors them into a constructed stylesheet (web/src/csp_styles.ts) and the browser
// still logs each refused element: counted, not failed.
let styleRefusals = 0;
function watchPage(page, problems) {
  page.on('pageerror', (e) => problems.push(`uncaught: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() !== 'error' || !/Content Security Policy|Refused to/i.test(m.text())) return;
    if (/inline style/i.test(m.text())) styleRefusals += 1;
    else problems.push(`CSP: ${m.text()}`);
  });
}

async function shot(page, name) {
  fs.mkdirSync(opts.screenshots, { recursive: true });
  const vp = page.viewportSize();
  const file = path.join(opts.screenshots, `${name}-${vp.width}x${vp.height}.png`);
  await page.screenshot({ path: file });
}

async function termText(page) {
  return page.locator('.term-host .xterm-rows').first().innerText();
}

async function waitForText(page, what, pred, timeout = kStep) {
  const deadline = Date.now() + timeout;
  let last = '';
  while (Date.now() < deadline) {
    last = await termText(page).catch(() => '');
    if (pred(last)) return last;
    await page.waitForTimeout(100);
  }
  throw new Failure(`timed out waiting for ${what}; the terminal shows:\n${last}`);
}

const lines = (text) => text.split('\n').map((l) => l.replace(/\u00a0/g, ' ').trimEnd());

async function signIn(page, base, key) {
  await page.goto(base);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Workspaces' }).waitFor({ timeout: kStep });
}

async function run(browser, berthd, base) {
  const problems = [];
  const ctx = await browser.newContext({ viewport: kViewports.laptop, acceptDownloads: true });
  const page = await ctx.newPage();
  page.setDefaultTimeout(kStep);
  watchPage(page, problems);

  // What a first visit transfers (bodies as sent, compressed or not, plus headers).
  const transferred = [];
  const onResponse = (r) => /\/v1\/watch\/|follow=1/.test(r.url()) || transferred.push(r.request().sizes().then((z) => z.responseBodySize + z.responseHeadersSize).catch(() => 0));
  page.on('response', onResponse);

  // Signed out: the form and nothing else; the API is closed to this browser.
  await page.goto(`${base}/w/anything/terminal`);
  await page.getByLabel('API key').waitFor();
  check(await page.getByRole('heading', { name: 'Workspaces' }).count() === 0, 'signed out, the page shows more than the sign-in form');
  check(await page.locator('header').count() === 0, 'signed out, the page shows the header');
  const signedOut = await page.evaluate(async () => (await fetch('/v1/workspaces')).status);
  check(signedOut === 401, `signed out, GET /v1/workspaces answered ${signedOut}, not 401`);
  await shot(page, '01-signin');
  await page.waitForLoadState('networkidle');
  const count = transferred.length;
  const firstLoad = (await Promise.all(transferred.splice(0))).reduce((a, b) => a + b, 0);
  log(`first load (the sign-in page): ${(firstLoad / 1024).toFixed(1)} KiB transferred in ${count} responses`);

  // A wrong key: berthd's own message, not a status code.
  await page.getByLabel('API key').fill('bk_wrong');
  await page.getByRole('button', { name: 'Sign in' }).click();
  const alert = page.getByRole('alert');
  await alert.waitFor();
  const alertText = (await alert.innerText()).trim();
  check(alertText.length > 5 && !/^(Error )?\d{3}$/.test(alertText), `a wrong key shows "${alertText}"`);
  log(`a wrong key: "${alertText}"`);
  await shot(page, '02-signin-error');

  await signIn(page, base, berthd.key);
  const cookies = await ctx.cookies();
  const session = cookies.find((c) => c.name === 'berth_session');
  check(session && session.httpOnly && session.sameSite === 'Strict', `the session cookie: ${JSON.stringify(cookies)}`);
  const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }));
  check(!stored.includes(berthd.key) && !/csrf/i.test(stored), `the page stored the key or the CSRF token: ${stored}`);
  await shot(page, '03-workspaces-empty');

  // Create; the row reaches running with no reload (a marker on window survives).
  await page.evaluate(() => { window.__noReload = 'still-here'; });
  await page.getByRole('button', { name: 'New workspace' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByLabel('Name').fill('webui-demo');
  await dialog.getByLabel('Labels').fill('team=web');
  await shot(page, '04-create');
  await dialog.getByRole('button', { name: 'Create' }).click();
  const row = page.locator('tr[data-workspace="webui-demo"]');
  await row.waitFor();
  await row.getByText('running', { exact: true }).waitFor({ timeout: kStep });
  check(await page.evaluate(() => window.__noReload) === 'still-here', 'the page reloaded while the workspace started');
  log('the workspace reached running, live');
  await shot(page, '05-workspaces');

  // Terminal: echo hi.
  await row.getByRole('link', { name: 'webui-demo' }).click();
  await page.locator('.term-pane .term-status', { hasText: 'connected' }).waitFor();
  const withTerminal = (await Promise.all(transferred.splice(0))).reduce((a, b) => a + b, 0);
  page.off('response', onResponse);
  log(`signing in, the list and a workspace's terminal: ${(withTerminal / 1024).toFixed(1)} KiB more`);
  await waitForText(page, 'a prompt', (t) => /[$#>]\s*$/m.test(lines(t).filter(Boolean).join('\n')));
  await page.locator('.term-host').first().click();
  await page.keyboard.type('echo hi');
  await page.keyboard.press('Enter');
  await waitForText(page, '"hi" on a line of its own', (t) => lines(t).some((l) => l.trim() === 'hi'));
  await shot(page, '06-terminal');

  // Reload: the same shell, its output replayed, its prompt working.
  await page.reload();
  await page.locator('.term-pane .term-status', { hasText: 'connected' }).waitFor();
  const replayed = await waitForText(page, 'the replay of "echo hi"', (t) => lines(t).some((l) => l.trim() === 'hi'));
  check(lines(replayed).some((l) => l.includes('echo hi')), `after the reload the command is not shown:\n${replayed}`);
  check(!/\[\?|\x1b|\^\[/.test(replayed), `stray escape codes after the replay:\n${replayed}`);
  check(await page.locator('.term-pane').count() === 1, 'after the reload there is more than one terminal');
  await page.locator('.term-host').first().click();
  await page.keyboard.type('echo again-$((40+2))');
  await page.keyboard.press('Enter');
  await waitForText(page, 'the prompt to work after the reload', (t) => lines(t).some((l) => l.trim() === 'again-42'));
  log('the terminal survived a reload');

  // A second terminal beside it; its shell exits and the pane says so.
  await page.getByRole('button', { name: 'New terminal' }).click();
  await page.locator('.term-pane').nth(1).locator('.term-status', { hasText: 'connected' }).waitFor();
  await page.locator('.term-pane').nth(1).locator('.term-host').click();
  await page.keyboard.type('exit 3');
  await page.keyboard.press('Enter');
  await page.locator('.term-pane').nth(1).getByText('The session has ended (exit code 3).').waitFor();
  await page.locator('.term-pane').nth(1).getByRole('button', { name: 'Remove' }).click();
  check(await page.locator('.term-pane').count() === 1, 'the ended terminal was not removed');
  await shot(page, '07-terminal-reloaded');

  // Files: upload, list, download back.
  const dir = path.join(berthd.tmp, 'webui-files');
  fs.mkdirSync(dir, { recursive: true });
  const payload = randomBytes(300 * 1024);
  const local = path.join(berthd.tmp, 'upload.bin');
  fs.writeFileSync(local, payload);
  await page.getByRole('link', { name: 'Files' }).click();
  await page.getByLabel('Go to').fill(dir);
  await page.getByRole('button', { name: 'Open', exact: true }).click();
  await page.getByText('This folder is empty').waitFor();
  await page.getByLabel('Files to upload').setInputFiles(local);
  const fileRow = page.locator('tr[data-file="upload.bin"]');
  await fileRow.waitFor();
  check(Buffer.compare(fs.readFileSync(path.join(dir, 'upload.bin')), payload) === 0, 'the uploaded file differs on the agent side');
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    fileRow.getByRole('link', { name: 'Download upload.bin' }).click(),
  ]);
  const got = fs.readFileSync(await download.path());
  check(Buffer.compare(got, payload) === 0, `the download differs: ${got.length} bytes, not ${payload.length}`);
  log('upload and download: byte-identical');
  await page.getByRole('button', { name: 'New folder' }).click();
  await page.getByRole('dialog').getByLabel('Name').fill('made-here');
  await page.getByRole('dialog').getByRole('button', { name: 'Create' }).click();
  await page.locator('tr[data-file="made-here"]').waitFor();
  check(fs.statSync(path.join(dir, 'made-here')).isDirectory(), 'the new folder is not on disk');
  await shot(page, '08-files');

  // Timeline.
  await page.getByRole('link', { name: 'Timeline' }).click();
  await page.locator('.ev[data-event-type="created"]').waitFor();
  await page.locator('.ev[data-event-type="started"]').waitFor();
  await shot(page, '09-timeline');

  await page.getByRole('link', { name: 'Previews' }).click();
  await page.getByRole('heading', { name: 'Listening ports' }).waitFor();
  await page.getByRole('heading', { name: 'Preview links' }).waitFor();
  // A private link to a listening port (the host's, on --transport unix), then revoked.
  await page.locator('table.list').first().getByRole('button', { name: 'Private link' }).first().click();
  const link = await page.getByLabel('Preview link').inputValue();
  check(/berth_preview_token=/.test(link), `the private link has no token: ${link}`);
  await page.getByRole('button', { name: 'Done' }).click();
  await page.getByRole('button', { name: 'Revoke' }).first().click();
  await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
  await page.getByRole('cell', { name: 'revoked' }).first().waitFor();
  await shot(page, '10-previews');

  await page.getByRole('link', { name: 'Network' }).click();
  await page.locator('.network, [role=alert]').locator('visible=true').first().waitFor();
  await shot(page, '11-network');
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Usage' }).click();
  await page.getByRole('heading', { name: 'Usage' }).waitFor();
  await page.locator('table.usage td', { hasText: 'webui-demo' }).waitFor();
  await shot(page, '12-usage');

  // CSRF: the cookie alone does not change anything.
  const noCsrf = await page.evaluate(async () => {
    const r = await fetch('/v1/workspaces', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"name":"csrf-probe"}' });
    return { status: r.status, body: await r.text() };
  });
  check(noCsrf.status === 403, `a POST without X-CSRF-Token answered ${noCsrf.status}: ${noCsrf.body}`);
  check((await berthd.api('GET', '/v1/workspaces/csrf-probe')).status === 404, 'the POST without the CSRF header made a workspace');

  // Phone width: the same pages in a second session.
  const phone = await browser.newContext({ viewport: kViewports.phone, isMobile: true, hasTouch: true });
  const pp = await phone.newPage();
  pp.setDefaultTimeout(kStep);
  watchPage(pp, problems);
  await pp.goto(base);
  await pp.getByLabel('API key').waitFor();
  await shot(pp, '01-signin');
  await signIn(pp, base, berthd.key);
  await pp.locator('tr[data-workspace="webui-demo"]').getByText('running', { exact: true }).waitFor();
  await shot(pp, '05-workspaces');
  await pp.getByRole('button', { name: 'New workspace' }).click();
  await shot(pp, '04-create');
  await pp.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
  await pp.goto(`${base}/w/webui-demo/terminal`);
  await pp.locator('.term-pane .term-status', { hasText: 'connected' }).waitFor();
  await waitForText(pp, 'the replay on the phone', (t) => lines(t).some((l) => l.trim() === 'again-42'));
  await shot(pp, '07-terminal-reloaded');
  await pp.goto(`${base}/w/webui-demo/files?path=${encodeURIComponent(dir)}`);
  await pp.locator('tr[data-file="upload.bin"]').waitFor();
  await shot(pp, '08-files');
  await pp.goto(`${base}/w/webui-demo/timeline`);
  await pp.locator('.ev[data-event-type="started"]').waitFor();
  await shot(pp, '09-timeline');
  await pp.goto(`${base}/w/webui-demo/previews`);
  await pp.getByRole('heading', { name: 'Preview links' }).waitFor();
  await pp.waitForTimeout(300);
  await shot(pp, '10-previews');
  await pp.goto(`${base}/w/webui-demo/network`);
  await pp.locator('.network, [role=alert]').locator('visible=true').first().waitFor();
  await shot(pp, '11-network');
  await pp.goto(`${base}/usage`);
  await pp.locator('table.usage td', { hasText: 'webui-demo' }).waitFor();
  await shot(pp, '12-usage');
  await phone.close();

  // Sign out: the form again, and the old cookie opens nothing.
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByLabel('API key').waitFor();
  const after = await page.evaluate(async () => (await fetch('/v1/workspaces')).status);
  check(after === 401, `signed out, GET /v1/workspaces answered ${after}`);
  const replay = await fetch(`${base}/v1/workspaces`, { headers: { Cookie: `berth_session=${session.value}` } });
  check(replay.status === 401, `the signed-out cookie still answers ${replay.status}`);
  await ctx.close();

  check(problems.length === 0, `the pages reported:\n${problems.join('\n')}`);
  if (styleRefusals) log(`${styleRefusals} inline <style> elements of xterm.js refused by the CSP (mirrored)`);
}

async function main() {
  const dist = path.join(root, 'web', 'dist');
  if (!fs.existsSync(path.join(dist, 'index.html'))) {
    console.log(`FAIL ${T}: ${dist}/index.html is missing: build it (scripts/setup, or npm run build in web/)`);
    return 1;
  }
  const stub = process.env.BERTH_WEBUI_STUB;  // development only: a stand-in for berthd's session routes
  const berthd = await startBerthd(stub ? {} : { config: { web_root: dist } });
  let front = null;
  let browser = null;
  try {
    let base = berthd.url;
    if (stub) {
      front = await (await import(stub)).startFront({ berthdUrl: berthd.url, webRoot: dist });
      base = front.url;
    }
    const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;
    browser = await chromium.launch({
      executablePath: process.env.BERTH_CHROMIUM || '/usr/bin/chromium', headless: true, chromiumSandbox: !asRoot, timeout: 60000,
    });
    const started = Date.now();
    await run(browser, berthd, base);
    console.log(`PASS ${T} (${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${opts.screenshots})`);
    return 0;
  } catch (e) {
    console.log(`FAIL ${T}: ${e instanceof Failure ? e.message : e.stack}`);
    try {
      log(`berthd's log (tail):\n${fs.readFileSync(berthd.logFile, 'utf8').split('\n').slice(-40).join('\n')}`);
    } catch {}
    return 1;
  } finally {
    if (browser) await browser.close().catch(() => {});
    if (front) front.close();
    await berthd.stop();
  }
}

process.exitCode = await main();
