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
// byte-identical; a text file opened, edited and saved in the editor (CRLF kept; a change made
// meanwhile in the workspace asks first; the API's error shown; binary and large files
// refused); the timeline shows the workspace's events and filters them by kind, actor and
// since (sent to berthd as type=, actor=, since=); a state-changing request without the CSRF
// header is refused (403); the admin pages (an operator makes a tenant and its admin key, shown
// once and copied; that key sees its tenant's keys only and no Tenants page; a write key sees
// neither; revoking asks, and the key stops working); signed out, the old cookie no longer
// reaches the API. No CSP violation or uncaught error on any page, and axe-core finds no
// serious or critical violation on any page, at laptop and phone width. Screenshots of each
// page at 1366x768 and 390x844 go to --screenshots (CTest: build/Testing/webui-screenshots).
// Exit 0 PASS, 1 FAIL.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { startBerthd } from '../../sdk/typescript/test/harness.mjs';
import { Failure, axeViolations, check, kStep, kViewports, launchChromium, lines, shot as shotIn, signIn, waitForText } from './webui_lib.mjs';

const T = 'integration_webui';
const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');

const { values: opts } = parseArgs({ options: { screenshots: { type: 'string', default: path.join(root, 'build', 'Testing', 'webui-screenshots') } } });

function log(m) {
  process.stderr.write(`${T}: ${m}\n`);
}

// axe-core's serious and critical findings, by page; the run fails on any at the end.
const a11y = [];
let a11yPages = 0;
async function checkA11y(page, name) {
  const found = await axeViolations(page);
  a11yPages += 1;
  const vp = page.viewportSize();
  for (const v of found) a11y.push(`${name} at ${vp.width}x${vp.height}: ${v}`);
}

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

// A screenshot, and axe-core on the same page as it is.
async function shot(page, name) {
  await shotIn(page, opts.screenshots, name);
  await checkA11y(page, name);
}

async function run(browser, berthd, base) {
  const problems = [];
  const ctx = await browser.newContext({ viewport: kViewports.laptop, acceptDownloads: true });
  await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
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
  // Text files for the editor: one with CRLF line endings, one too large to open.
  fs.writeFileSync(path.join(dir, 'notes.txt'), 'alpha\r\nbeta\r\n');
  fs.writeFileSync(path.join(dir, 'big.txt'), 'x'.repeat(2 * 1024 * 1024));
  await page.getByRole('button', { name: 'Refresh' }).click();
  await page.locator('tr[data-file="notes.txt"]').waitFor();
  await shot(page, '08-files');

  // The editor: open, change, save (CRLF kept).
  await page.locator('tr[data-file="notes.txt"]').getByRole('link', { name: 'notes.txt', exact: true }).click();
  const editor = page.getByLabel('Contents of notes.txt');
  await editor.waitFor();
  check(await editor.inputValue() === 'alpha\nbeta\n', `the editor shows ${JSON.stringify(await editor.inputValue())}`);
  await editor.fill('alpha\nbeta\ngamma\n');
  await page.getByText('Unsaved changes').waitFor();
  await shot(page, '16-editor');
  await page.getByRole('button', { name: 'Save', exact: true }).click();
  await page.getByRole('status').filter({ hasText: 'Saved notes.txt' }).waitFor();
  const saved = fs.readFileSync(path.join(dir, 'notes.txt'), 'utf8');
  check(saved === 'alpha\r\nbeta\r\ngamma\r\n', `after saving, notes.txt holds ${JSON.stringify(saved)}`);
  // Changed in the workspace meanwhile: saving asks first, and Overwrite writes ours.
  fs.writeFileSync(path.join(dir, 'notes.txt'), 'changed by the agent\r\n');
  fs.utimesSync(path.join(dir, 'notes.txt'), new Date(), new Date(Date.now() + 5000));
  await editor.fill('alpha\nmine\n');
  await page.keyboard.press('Control+s');
  const conflict = page.getByRole('dialog');
  await conflict.getByText('changed in the workspace').waitFor();
  await conflict.getByRole('button', { name: 'Overwrite' }).click();
  await page.getByRole('status').filter({ hasText: 'Saved notes.txt' }).waitFor();
  const overwritten = fs.readFileSync(path.join(dir, 'notes.txt'), 'utf8');
  check(overwritten === 'alpha\r\nmine\r\n', `after Overwrite, notes.txt holds ${JSON.stringify(overwritten)}`);
  // A save the agent refuses (the file became a folder): its error is shown, not a status.
  fs.rmSync(path.join(dir, 'notes.txt'));
  fs.mkdirSync(path.join(dir, 'notes.txt'));
  await editor.fill('this save fails\n');
  await page.getByRole('button', { name: 'Save', exact: true }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Overwrite' }).click();
  const saveError = page.locator('.editor .error').filter({ hasText: 'Saving notes.txt failed' });
  await saveError.waitFor();
  const saveErrorText = (await saveError.locator('span').first().innerText()).trim();
  check(!/failed: (berthd answered )?\d{3}\b/.test(saveErrorText), `the failed save shows a bare status: ${saveErrorText}`);
  log(`a refused save shows: "${saveErrorText}"`);
  await page.getByRole('button', { name: 'Close', exact: true }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Discard' }).click();
  await page.locator('tr[data-file="upload.bin"]').waitFor();
  // Binary and large files are refused with a reason and a download link.
  await page.locator('tr[data-file="upload.bin"]').getByRole('link', { name: 'upload.bin', exact: true }).click();
  await page.locator('.refused').filter({ hasText: /cannot be shown as text: it (is a binary file|is not UTF-8)/ }).waitFor();
  await page.locator('.refused').getByRole('link', { name: 'Download upload.bin' }).waitFor();
  await shot(page, '17-editor-binary');
  await page.getByRole('button', { name: 'Close', exact: true }).click();
  check(await page.locator('tr[data-file="big.txt"]').getByRole('link', { name: 'big.txt', exact: true }).getAttribute('download') === 'big.txt',
        'the 2 MiB file is not a plain download link');
  await page.goto(`${base}/w/webui-demo/files?path=${encodeURIComponent(dir)}&file=${encodeURIComponent(path.join(dir, 'big.txt'))}`);
  await page.locator('.refused').filter({ hasText: 'big.txt is 2.0 MiB; the editor opens text files up to 1.0 MiB' }).waitFor();
  check(await page.locator('textarea').count() === 0, 'the 2 MiB file was opened in the editor');
  log('the editor: saved with CRLF kept, asked before overwriting a change, showed the refused save, refused binary and 2 MiB files');

  // Timeline.
  await page.getByRole('link', { name: 'Timeline' }).click();
  await page.locator('.ev[data-event-type="created"]').waitFor();
  await page.locator('.ev[data-event-type="started"]').waitFor();
  await shot(page, '09-timeline');

  // Filters: by kind (sent as type=), by actor, since a time; they live in the address.
  const asked = [];
  const onEvents = (r) => r.url().includes('/events?') && asked.push(new URL(r.url()).searchParams);
  page.on('request', onEvents);
  await page.locator('details.multi > summary').click();
  await page.getByRole('checkbox', { name: 'started', exact: true }).check();
  await page.waitForURL(/kind=started/);
  await page.locator('.ev[data-event-type="started"]').waitFor();
  await page.getByText('Kinds: started').waitFor();
  check(await page.locator('.ev:not([data-event-type="started"])').count() === 0, 'filtered by kind, other kinds are shown');
  check(asked.some((q) => q.get('type') === 'started'), `no events request carried type=started: ${asked.map(String).join(' | ')}`);
  await page.locator('details.multi > summary').click();
  await shot(page, '09-timeline-filtered');
  await page.getByRole('button', { name: 'Clear filters' }).click();
  await page.locator('.ev[data-event-type="created"]').waitFor();
  // Since a time in the future: nothing; "Last hour": everything again (it was made just now).
  await page.goto(`${base}/w/webui-demo/timeline?since=${encodeURIComponent(new Date(Date.now() + 3600_000).toISOString().replace(/\.\d+Z$/, 'Z'))}`);
  await page.getByText('No events match the filters').waitFor();
  check(asked.some((q) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/.test(q.get('since') ?? '')), 'no events request carried since= as RFC 3339');
  await page.getByRole('button', { name: 'Last hour' }).click();
  await page.locator('.ev[data-event-type="created"]').waitFor();
  // Actor: berthd's own actions. Each shown event names that actor (berthd without actors on
  // its events shows none).
  const withActor = await page.locator('.ev[data-actor]:not([data-actor=""])').count();
  await page.goto(`${base}/w/webui-demo/timeline?actor=system`);
  await page.locator('.timeline .stream.live').waitFor();
  await page.waitForTimeout(300);
  check(asked.some((q) => q.get('actor') === 'system'), 'no events request carried actor=system');
  const others = await page.locator('.ev:not([data-actor="system"])').count();
  check(others === 0, `filtered by actor=system, ${others} events of other actors are shown`);
  check(await page.getByRole('search').locator('select').inputValue() === 'system', 'the actor filter is not shown as chosen');
  if (withActor === 0) log('note: this berthd sends no actor on its events: the actor filter showed none, as it should');
  else log(`${withActor} events carry an actor; the actor filter kept only "system"`);
  page.off('request', onEvents);
  log('timeline filters: kind, since and actor, each sent to berthd and applied');

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
  // Open, for this session alone: a server listening on the host (a workspace's own ports on
  // --transport unix) opens in a new tab through a pass that leaves the address bar at once.
  const app = http.createServer((req, res) => {
    res.setHeader('Content-Type', 'text/html');
    res.end('<!doctype html><title>app</title><h1>hello from the app</h1>');
  });
  await new Promise((resolve) => app.listen(0, '127.0.0.1', resolve));
  const appPort = app.address().port;
  await page.locator('.previews .toolbar').getByRole('button', { name: 'Refresh' }).click();
  const portRow = page.locator('table.list').first().locator('tr', { has: page.getByRole('cell', { name: String(appPort), exact: true }) });
  await portRow.first().waitFor();
  const [tab] = await Promise.all([
    page.context().waitForEvent('page'),
    portRow.first().getByRole('button', { name: 'Open', exact: true }).click(),
  ]);
  await tab.getByRole('heading', { name: 'hello from the app' }).waitFor({ timeout: kStep });
  const opened = new URL(tab.url());
  check(opened.hostname === `${appPort}-webui-demo.preview.localhost`, `the preview opened at ${tab.url()}`);
  check(opened.search === '', `the pass stayed in the address bar: ${tab.url()}`);
  await tab.close();
  app.close();
  log('a listening port opened from the Previews tab, for this session, with a clean address');
  await shot(page, '10-previews');

  await page.getByRole('link', { name: 'Network' }).click();
  await page.locator('.network, [role=alert]').locator('visible=true').first().waitFor();
  await shot(page, '11-network');
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Usage' }).click();
  await page.getByRole('heading', { name: 'Usage' }).waitFor();
  await page.locator('table.usage td', { hasText: 'webui-demo' }).waitFor();
  await shot(page, '12-usage');

  // Admin pages, as the operator: a tenant, and its first key (admin scope), shown once.
  const mainNav = page.getByRole('navigation', { name: 'Main' });
  await mainNav.getByRole('link', { name: 'Tenants' }).click();
  await page.getByRole('heading', { name: 'Tenants' }).waitFor();
  await page.getByLabel("New tenant's name").fill('webui-team');
  await page.getByRole('button', { name: 'Create tenant' }).click();
  await page.locator('tr[data-tenant="webui-team"]').waitFor();
  await shot(page, '15-tenants');
  await page.getByRole('link', { name: 'create its first key' }).click();
  const keyDialog = page.getByRole('dialog');
  await keyDialog.getByRole('heading', { name: 'New API key' }).waitFor();
  check(await keyDialog.locator('select[name="tenant"] option:checked').innerText() === 'webui-team',
        'the new key dialog from the tenant does not name webui-team');
  await keyDialog.getByLabel('Name').fill('team-admin');
  await keyDialog.locator('select[name="scope"]').selectOption('admin');
  await keyDialog.getByRole('button', { name: 'Create key' }).click();
  const shown = keyDialog.getByLabel('New API key');
  await shown.waitFor();
  const teamKey = await shown.inputValue();
  check(/^bk_[0-9a-f]{16,}$/.test(teamKey), `the new key looks like ${teamKey}`);
  await keyDialog.getByRole('button', { name: 'Copy' }).click();
  await keyDialog.getByText('Copied to the clipboard.').waitFor();
  const clip = await page.evaluate(() => navigator.clipboard.readText());
  check(clip === teamKey, 'the clipboard does not hold the new key');
  await shot(page, '14-new-key');
  const me = await fetch(`${base}/v1/me`, { headers: { Authorization: `Bearer ${teamKey}` } });
  const meBody = await me.json();
  check(me.status === 200 && meBody.key?.scope === 'admin' && meBody.tenant?.name === 'webui-team',
        `the new key's /v1/me: ${me.status} ${JSON.stringify(meBody)}`);
  await keyDialog.getByRole('button', { name: 'Done' }).click();
  await page.locator(`tr[data-key="${meBody.key.id}"]`).waitFor();
  check(!(await page.content()).includes(teamKey), 'the key is still in the page after Done');
  await shot(page, '13-keys');
  log('an operator made a tenant and its admin key (shown once, copied, working)');

  // That admin key: its tenant's keys only, no Tenants page; a write key: neither page.
  const writeKey = (await berthd.api('POST', '/v1/keys', { scope: 'write', name: 'webui-writer' })).body.key;
  check(typeof writeKey === 'string', 'could not make a write key');
  {
    const other = await browser.newContext({ viewport: kViewports.laptop });
    const op = await other.newPage();
    op.setDefaultTimeout(kStep);
    watchPage(op, problems);
    await signIn(op, base, teamKey);
    const nav = op.getByRole('navigation', { name: 'Main' });
    await nav.getByRole('link', { name: 'API keys' }).click();
    await op.locator(`tr[data-key="${meBody.key.id}"]`).getByText('this session').waitFor();
    check(await op.locator('tr[data-key]').count() === 1, 'the tenant admin sees keys of other tenants');
    check(await nav.getByRole('link', { name: 'Tenants' }).count() === 0, 'an admin key is offered the Tenants page');
    await op.goto(`${base}/admin/tenants`);
    await op.getByText('This page needs a key of operator scope').waitFor();
    await op.getByRole('button', { name: 'Sign out' }).click();
    await signIn(op, base, writeKey);
    check(await op.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: /API keys|Tenants/ }).count() === 0,
          'a write key is offered the admin pages');
    await op.goto(`${base}/admin/keys`);
    await op.getByText('This page needs a key of admin scope').waitFor();
    await other.close();
  }

  // Revoke, after a confirmation: the key stops working.
  await page.getByRole('search').locator('select').selectOption({ label: 'webui-team' });
  await page.waitForURL(/tenant=/);
  const teamRow = page.locator(`tr[data-key="${meBody.key.id}"]`);
  await teamRow.getByRole('button', { name: 'Revoke team-admin' }).click();
  await page.getByRole('dialog').getByText('stops working at once').waitFor();
  await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
  await page.getByRole('status').filter({ hasText: 'is revoked' }).waitFor();
  await teamRow.waitFor({ state: 'detached' });
  const revoked = await fetch(`${base}/v1/me`, { headers: { Authorization: `Bearer ${teamKey}` } });
  check(revoked.status === 401, `the revoked key still answers ${revoked.status}`);
  log('admin pages: scopes respected, the revoked key refused');

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
  await pp.goto(`${base}/admin/keys`);
  await pp.locator('tr[data-key]').first().waitFor();
  await shot(pp, '13-keys');
  await pp.getByRole('button', { name: 'New key' }).click();
  await pp.getByRole('dialog').locator('select[name="scope"]').waitFor();
  await shot(pp, '14-new-key');
  await pp.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
  await pp.goto(`${base}/admin/tenants`);
  await pp.locator('tr[data-tenant="webui-team"]').waitFor();
  await shot(pp, '15-tenants');
  await pp.goto(`${base}/w/webui-demo/files?path=${encodeURIComponent(dir)}&file=${encodeURIComponent(path.join(dir, 'upload.bin'))}`);
  await pp.locator('.refused').waitFor();
  await shot(pp, '17-editor-binary');
  fs.writeFileSync(path.join(dir, 'phone.txt'), 'on the phone\n');
  await pp.goto(`${base}/w/webui-demo/files?path=${encodeURIComponent(dir)}&file=${encodeURIComponent(path.join(dir, 'phone.txt'))}`);
  await pp.getByLabel('Contents of phone.txt').waitFor();
  await shot(pp, '16-editor');
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
  check(a11y.length === 0, `axe-core found serious or critical violations:\n${a11y.join('\n')}`);
  log(`axe-core: no serious or critical violation on ${a11yPages} pages`);
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
    browser = await launchChromium();
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
