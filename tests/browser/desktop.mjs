#!/usr/bin/env node
// The desktop in the web UI (issues 14 and 15) in Debian's Chromium against a real berthd on
// --transport unix, with a real RFB server where berthd looks for the workspace's screen: QEMU
// with no guest (-S, VGA, -vnc on <data>/workspaces/<id>/run/vnc.sock), whose screen is its
// "Guest has not initialized the display" text at 640x480 (or the VGA text mode's 720x400).
//
//   BERTHD_BIN=… BERTH_AGENT_BIN=… node desktop.mjs [--screenshots DIR]
//
// Checks, in order: the Desktop tab shows the screen (noVNC's canvas at the screen's size,
// with more than one colour in it) and says the agent holds control and that you are watching;
// when the screen's server ends the tab says it is reconnecting and comes back by itself (a
// fresh ticket) once the screen is there again; Take over makes berthd say a person holds it
// (GET …/desktop/control with the test's key), the page reconnects with a control ticket, and
// a click and a key on the screen reach QEMU (a `desktop_input` event by a human); in control,
// Paste into VM puts any Unicode on the guest's clipboard (berthd's desktop.clipboard_tool is
// the harness's fake, its text in a file) and says to press Ctrl+V, the text prefilled from the
// browser's clipboard when the page may read it, Copy from VM shows the guest's clipboard and
// copies it to the browser's, a 423 says who holds control; Hand back
// with a note gives it back (the agent holds it, the release event carries the note); a
// private takeover makes the agent's screenshot and clipboard a 423 (the person still reads the
// clipboard); a `view` link made on the tab opens
// desktop.html with no session, shows the screen, leaves no ticket in the address bar and
// cannot take over (berthd's error on the page, control unchanged); a `control` link of
// another key takes over, pastes into the VM through its ticket, and hands back, and the tab follows both; the
// agent's request for help (POST …/desktop/control/request) reaches a page already open, pushed
// (every read after the page's first waits on ?wait=change), as a plain-text banner whose Take
// over works, and the hand-back answers it; a workspace without a screen
// says so, and a stopped one offers Start. No CSP violation or uncaught error, and no serious
// or critical axe-core finding, on any page, at laptop and phone width. Screenshots go to
// --screenshots (desktop-*.png).
// Exit 0 PASS, 1 FAIL.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { startBerthd, waitFor } from '../../sdk/typescript/test/harness.mjs';
import { Failure, axeViolations, check, kStep, kViewports, launchChromium, shot as shotIn, signIn } from './webui_lib.mjs';

const T = 'integration_webui_desktop';
const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const { values: opts } = parseArgs({ options: { screenshots: { type: 'string', default: path.join(root, 'build', 'Testing', 'webui-screenshots') } } });

function log(m) {
  process.stderr.write(`${T}: ${m}\n`);
}

const a11y = [];
const problems = [];
function watchPage(page, name) {
  page.on('pageerror', (e) => problems.push(`${name}: uncaught: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text())) problems.push(`${name}: CSP: ${m.text()}`);
  });
}
async function shot(page, name) {
  await shotIn(page, opts.screenshots, name);
  const vp = page.viewportSize();
  for (const v of await axeViolations(page)) a11y.push(`${name} at ${vp.width}x${vp.height}: ${v}`);
}

/** QEMU with no guest, its VNC server on `socket`: a real RFB 3.8 server with a screen. */
async function startQemu(socket, logFile) {
  check(Buffer.byteLength(socket) < 108, `the VNC socket path is too long for a unix socket: ${socket}`);
  fs.mkdirSync(path.dirname(socket), { recursive: true });
  const out = fs.openSync(logFile, 'w');
  const proc = spawn('qemu-system-x86_64', ['-machine', 'pc', '-accel', 'tcg', '-m', '64', '-nodefaults', '-vga', 'std', '-S',
                                             '-display', `vnc=unix:${socket}`], { stdio: ['ignore', out, out] });
  let exited = null;
  proc.on('exit', (code, signal) => { exited = { code, signal }; });
  await waitFor('QEMU\'s VNC socket', () => {
    if (exited) throw new Error(`qemu-system-x86_64 exited ${JSON.stringify(exited)}: ${fs.readFileSync(logFile, 'utf8')}`);
    return fs.existsSync(socket);
  }, 30_000);
  return {
    async stop() {
      if (exited) return;
      proc.kill('SIGTERM');
      try {
        await waitFor('QEMU to exit', () => exited, 10_000);
      } catch {
        proc.kill('SIGKILL');
      }
    },
  };
}

/** noVNC's canvas: its size, and how many distinct colours a sample of its pixels has. */
async function canvasInfo(page) {
  return page.evaluate(() => {
    const c = document.querySelector('.desk-screen canvas');
    if (!c || !c.width) return null;
    const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    const colours = new Set();
    let lit = 0;
    for (let i = 0; i < data.length; i += 4 * 7) {
      colours.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
      if (data[i] + data[i + 1] + data[i + 2] > 60) lit += 1;
    }
    return { width: c.width, height: c.height, colours: colours.size, lit };
  });
}

async function checkScreen(page, where) {
  await page.locator('.desk-conn.connected').waitFor({ timeout: kStep });
  const info = await waitFor(`${where}: a screen with something on it`, async () => {
    const i = await canvasInfo(page);
    return i && i.colours > 1 && i.lit > 0 ? i : null;
  }, 20_000).catch(async () => { throw new Failure(`${where}: the canvas stays blank: ${JSON.stringify(await canvasInfo(page))}`); });
  const size = `${info.width}x${info.height}`;
  check(size === '640x480' || size === '720x400', `${where}: the canvas is ${size}, not QEMU's 640x480 or 720x400`);
  // Scaled to fit: the canvas as shown is no wider than its frame.
  const fits = await page.evaluate(() => {
    const c = document.querySelector('.desk-screen canvas').getBoundingClientRect();
    const f = document.querySelector('.desk-screen').getBoundingClientRect();
    return c.width <= f.width + 1 && c.height <= f.height + 1 && c.width > 0;
  });
  check(fits, `${where}: the screen is not scaled to fit its frame`);
  log(`${where}: the screen is ${size}, ${info.colours} colours in the sample`);
}

async function control(berthd, ws) {
  const r = await berthd.api('GET', `/v1/workspaces/${ws}/desktop/control`);
  check(r.status === 200, `GET control: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

async function events(berthd, ws) {
  const r = await berthd.api('GET', `/v1/workspaces/${ws}/events?limit=1000`);
  check(r.status === 200, `GET events: ${r.status}`);
  return r.body.events;
}

const clipboardText = (berthd) => fs.readFileSync(path.join(berthd.clipboard, 'text'), 'utf8');

/** In control on the tab: Paste into VM and Copy from VM, and a 423 in plain words. */
async function checkClipboard(page, berthd) {
  const text = 'gr\u00fc\u00dfe \u4e16\u754c \u2713 \u{1F600}\nline two';
  // The browser's clipboard holds text: the dialog starts with it (the context may read it).
  await page.evaluate(() => navigator.clipboard.writeText('from the browser'));
  await page.getByRole('button', { name: 'Paste into VM' }).click();
  const paste = page.getByRole('dialog', { name: 'Paste into the VM' });
  const box = paste.getByLabel("Text for the VM's clipboard");
  await waitFor('the paste box filled from the browser\'s clipboard', async () => (await box.inputValue()) === 'from the browser', 10_000);
  await paste.getByText("From your computer's clipboard").waitFor();
  await box.fill(text);
  await shot(page, 'desktop-02-paste');
  await paste.getByRole('button', { name: "Send to the VM's clipboard" }).click();
  await paste.waitFor({ state: 'hidden' });
  const note = page.locator('.desk-pasted');
  await note.waitFor();
  check(/Ctrl\+V in the VM/.test(await note.innerText()), `after the paste the page says: ${await note.innerText()}`);
  check(clipboardText(berthd) === text, `the guest's clipboard holds ${JSON.stringify(clipboardText(berthd))}`);
  // berthd writes the timeline just after it answers.
  const set = await waitFor('the paste\'s desktop_clipboard_set event', async () =>
    (await events(berthd, 'desk')).find((e) => e.type === 'desktop_clipboard_set' && e.data?.holder === 'human'), 10_000);
  check(set.data.bytes === Buffer.byteLength(text), `the paste's event: ${JSON.stringify(set)}`);
  check(!JSON.stringify(set).includes('line two'), 'the timeline keeps the pasted text');

  // Copy from VM: what was copied in the guest meanwhile, and Copy puts it on the browser's clipboard.
  const inVm = 'copied in the VM: \u00fcn\u00efc\u00f6d\u00e9';
  fs.writeFileSync(path.join(berthd.clipboard, 'text'), inVm);
  await page.getByRole('button', { name: 'Copy from VM' }).click();
  const copy = page.getByRole('dialog', { name: 'Copy from the VM' });
  const shown = copy.getByLabel("The VM's clipboard");
  await waitFor('the VM\'s clipboard in the copy box', async () => (await shown.inputValue()) === inVm, 20_000);
  await copy.getByRole('button', { name: 'Copy', exact: true }).click();
  await copy.getByRole('status').filter({ hasText: 'Copied' }).waitFor();
  const got = await page.evaluate(() => navigator.clipboard.readText());
  check(got === inVm, `after Copy the browser's clipboard holds ${JSON.stringify(got)}`);
  await shot(page, 'desktop-02-copy');
  await copy.getByRole('button', { name: 'Close' }).click();
  await copy.waitFor({ state: 'hidden' });

  // Someone else holds control by the time the text is sent (a lease that ran out and another
  // person's takeover; berthd's answer made here): the dialog says who, in plain words.
  await page.route(/\/desktop\/clipboard$/, (route) => route.fulfill({
    status: 423, json: { error: { code: 'locked', message: 'a person (key_0ther) has held the desktop since …',
                                  details: { holder: 'human', by: 'key_0ther', since: new Date().toISOString(), private: false } } },
  }));
  await page.getByRole('button', { name: 'Paste into VM' }).click();
  await box.fill('refused');
  await paste.getByRole('button', { name: "Send to the VM's clipboard" }).click();
  const refused = paste.getByRole('alert').filter({ hasText: 'key_0ther' });
  await refused.waitFor();
  check(/A person \(key_0ther\) has held control since .*only they can change the VM's clipboard/.test(await refused.innerText()),
        `the 423 shows: ${await refused.innerText()}`);
  await shot(page, 'desktop-02-paste-refused');
  await page.unroute(/\/desktop\/clipboard$/);
  await paste.getByRole('button', { name: 'Cancel' }).click();
  await paste.waitFor({ state: 'hidden' });
  check(clipboardText(berthd) === inVm, 'the refused paste changed the guest\'s clipboard');
  log('in control: Paste into VM and Copy from VM work; a 423 says who holds control');
}

async function makeWorkspace(berthd, name) {
  const made = await berthd.api('POST', '/v1/workspaces', { name });
  check(made.status === 201, `create ${name}: ${made.status} ${JSON.stringify(made.body)}`);
  const ready = await berthd.api('POST', `/v1/workspaces/${name}/wait`, { state: 'running', timeout_s: 60 });
  check(ready.status === 200, `wait ${name}: ${ready.status} ${JSON.stringify(ready.body)}`);
  return made.body.id;
}

async function run(browser, berthd, base) {
  const id = await makeWorkspace(berthd, 'desk');
  const socket = path.join(berthd.tmp, 'data', 'workspaces', id, 'run', 'vnc.sock');
  const screen = { qemu: await startQemu(socket, path.join(berthd.tmp, 'qemu.log')) };
  // The screen goes away and comes back (a reboot): the old one ended, a new one on the same socket.
  screen.restart = async () => {
    await screen.qemu.stop();
    fs.rmSync(socket, { force: true });
    screen.qemu = await startQemu(socket, path.join(berthd.tmp, 'qemu2.log'));
  };
  screen.stop = async () => {
    await screen.qemu.stop();
    fs.rmSync(socket, { force: true });
  };
  try {
    await withScreen(browser, berthd, base, id, screen);
  } finally {
    await screen.qemu.stop();
  }
}

async function withScreen(browser, berthd, base, id, screen) {
  // --- The Desktop tab, signed in, at laptop width.
  // The page may read and write the browser's clipboard (the paste dialog's prefill, Copy).
  const ctx = await browser.newContext({ viewport: kViewports.laptop, permissions: ['clipboard-read', 'clipboard-write'] });
  const page = await ctx.newPage();
  page.setDefaultTimeout(kStep);
  watchPage(page, 'desktop tab');
  await signIn(page, base, berthd.key);
  await page.goto(`${base}/w/desk/desktop`);
  await checkScreen(page, 'the Desktop tab');
  const who = page.locator('.desk-who');
  await who.filter({ hasText: 'You are watching' }).waitFor();
  await who.filter({ hasText: 'The agent has control' }).waitFor();
  check(await page.locator('.desktop[data-mode="view"]').count() === 1, 'watching, the viewer is not a view viewer');
  check((await control(berthd, 'desk')).holder === 'agent', 'before the takeover the agent does not hold control');
  log('the Desktop tab shows the screen; the agent holds control; you are watching');
  await shot(page, 'desktop-01-watching');

  // The connection drops (the screen's server ends): the tab says so and reconnects, with a
  // fresh ticket, once the screen is back.
  await screen.stop();
  await page.locator('.desk-conn.reconnecting').waitFor({ timeout: 20_000 });
  await shot(page, 'desktop-01-reconnecting');
  await screen.restart();
  await checkScreen(page, 'after the screen came back');
  log('the connection dropped and came back by itself');

  // Take over: berthd says a person holds it, and the page reconnects as a control viewer.
  await page.getByRole('button', { name: 'Take over', exact: true }).click();
  await who.filter({ hasText: 'You have control' }).waitFor();
  const taken = await control(berthd, 'desk');
  check(taken.holder === 'human' && !taken.private && taken.lease_expires, `after Take over, GET control: ${JSON.stringify(taken)}`);
  await page.locator('.desktop[data-mode="control"] .desk-conn.connected').waitFor();
  await checkScreen(page, 'in control');
  const opened = (await events(berthd, 'desk')).filter((e) => e.type === 'desktop_viewer_opened' && e.data?.mode === 'control');
  check(opened.length >= 1, 'no control viewer was opened after the takeover');
  // A click and a key on the screen reach QEMU: berthd counts a human's input burst (it ends
  // after 5 s of quiet) and drops none of it.
  const canvas = page.locator('.desk-screen canvas');
  await canvas.click({ position: { x: 40, y: 40 } });
  await page.keyboard.press('a');
  const input = await waitFor('a desktop_input event by a human', async () =>
    (await events(berthd, 'desk')).find((e) => e.type === 'desktop_input' && e.data?.actor === 'human'), 20_000);
  check((input.data.clicks ?? 0) >= 1 && (input.data.keys ?? 0) >= 1, `the human input event: ${JSON.stringify(input.data)}`);
  log(`taken over: ${taken.by} holds control; input reached the screen (${JSON.stringify(input.data)})`);
  await shot(page, 'desktop-02-control');
  await checkClipboard(page, berthd);

  // Another tab shown meanwhile: the control viewer stays open (berthd would hand control back
  // to the agent 30 s after the last one closed).
  await page.getByRole('link', { name: 'Files' }).click();
  await page.waitForTimeout(1500);
  const hiddenConn = await page.evaluate(() => document.querySelector('.desk-conn')?.className ?? '');
  check(hiddenConn.includes('connected'), `in control, with the Files tab shown, the screen is "${hiddenConn}"`);
  await page.getByRole('link', { name: 'Desktop' }).click();
  await page.locator('.desktop[data-mode="control"] .desk-conn.connected').waitFor();

  // Hand back with a note.
  await page.getByLabel('Note for the agent (optional)').fill('signed in; carry on');
  await page.getByRole('button', { name: 'Hand back' }).click();
  await who.filter({ hasText: 'You are watching' }).waitFor();
  const back = await control(berthd, 'desk');
  check(back.holder === 'agent', `after Hand back, GET control: ${JSON.stringify(back)}`);
  const released = (await events(berthd, 'desk')).filter((e) => e.type === 'desktop_control_released');
  check(released.at(-1)?.data?.note === 'signed in; carry on', `the release event: ${JSON.stringify(released.at(-1))}`);
  await page.locator('.desktop[data-mode="view"] .desk-conn.connected').waitFor();
  log('handed back with a note: the agent holds control again');

  // Private takeover: berthd refuses the agent's screenshots meanwhile.
  await page.getByRole('button', { name: 'Take over privately' }).click();
  await who.filter({ hasText: 'privately' }).waitFor();
  check((await control(berthd, 'desk')).private === true, 'a private takeover is not private');
  const hidden = await fetch(`${berthd.url}/v1/workspaces/desk/desktop/screenshot`, { headers: { Authorization: `Bearer ${berthd.key}` } });
  check(hidden.status === 423, `the agent's screenshot during a private takeover: ${hidden.status}`);
  // The agent cannot read the VM's clipboard meanwhile (the person may have copied a
  // password); the person holding the private takeover can (Copy from VM).
  // (The page signed in with berthd's key: the agent here is a key of its own.)
  const agentKey = await berthd.api('POST', '/v1/keys', { scope: 'read', name: 'agent' });
  check(agentKey.status === 201, `an agent's key: ${agentKey.status}`);
  const agentRead = await fetch(`${berthd.url}/v1/workspaces/desk/desktop/clipboard`, { headers: { Authorization: `Bearer ${agentKey.body.key}` } });
  check(agentRead.status === 423, `the agent's clipboard read during a private takeover: ${agentRead.status}`);
  const secret = 'copied in private';
  fs.writeFileSync(path.join(berthd.clipboard, 'text'), secret);
  await page.getByRole('button', { name: 'Copy from VM' }).click();
  const privateCopy = page.getByRole('dialog', { name: 'Copy from the VM' });
  const privateShown = privateCopy.getByLabel("The VM's clipboard");
  await waitFor('the VM\'s clipboard in the private copy box', async () => (await privateShown.inputValue()) === secret, 20_000);
  await privateCopy.getByRole('button', { name: 'Close' }).click();
  await privateCopy.waitFor({ state: 'hidden' });
  await page.getByRole('button', { name: 'Hand back' }).click();
  await who.filter({ hasText: 'You are watching' }).waitFor();
  log('a private takeover hides the screen and the clipboard from the agent (423), not from the person, until handed back');

  // --- A shared view link on desktop.html, in a browser with no session.
  const anon = await browser.newContext({ viewport: kViewports.laptop });
  const lp = await anon.newPage();
  lp.setDefaultTimeout(kStep);
  watchPage(lp, 'view link');
  // Made on the tab ("Share this desktop"), opened where no one is signed in.
  await page.getByText('Share this desktop').click();
  await page.getByRole('button', { name: 'Make a view link' }).click();
  const link = await page.getByLabel('The view link').inputValue();
  const ticket = /[#&]ticket=(dt_[0-9a-f]{64})/.exec(link)?.[1];
  check(link.startsWith(`${base}/desktop.html#ws=`) && ticket && link.includes('mode=view'), `the view link: ${link}`);
  await lp.goto(link);
  await checkScreen(lp, 'the view link');
  check(!lp.url().includes(ticket), `the ticket stays in the address bar: ${lp.url()}`);
  await lp.locator('.desk-who').filter({ hasText: 'The agent has control' }).waitFor();
  await lp.getByRole('button', { name: 'Take over', exact: true }).click();
  const refused = lp.getByRole('alert').filter({ hasText: 'Taking over failed' });
  await refused.waitFor();
  const refusedText = await refused.innerText();
  check(/view ticket/i.test(refusedText), `the view link's takeover shows: ${refusedText}`);
  check((await control(berthd, 'desk')).holder === 'agent', 'a view link took control');
  log(`a view link cannot take over: "${refusedText.trim()}"`);
  await shot(lp, 'desktop-03-view-link');
  await lp.setViewportSize(kViewports.phone);
  await shot(lp, 'desktop-03-view-link');

  // A control link takes over and hands back through its ticket.
  const cp = await anon.newPage();
  cp.setDefaultTimeout(kStep);
  watchPage(cp, 'control link');
  // Made with another person's key, so the signed-in tab sees someone else take over.
  const other = await berthd.api('POST', '/v1/keys', { scope: 'write', name: 'helper' });
  check(other.status === 201, `a second key: ${other.status} ${JSON.stringify(other.body)}`);
  const ctr = await fetch(`${berthd.url}/v1/workspaces/desk/desktop/tickets`, {
    method: 'POST', headers: { Authorization: `Bearer ${other.body.key}`, 'Content-Type': 'application/json' }, body: '{"mode":"control"}',
  });
  check(ctr.status === 201, `a control ticket: ${ctr.status}`);
  const ct = { body: await ctr.json() };
  await cp.goto(`${base}/desktop.html#ws=${id}&ticket=${ct.body.ticket}&mode=control`);
  await checkScreen(cp, 'the control link');
  await cp.getByRole('button', { name: 'Take over', exact: true }).click();
  await cp.locator('.desk-who').filter({ hasText: 'You have control' }).waitFor();
  const byLink = await control(berthd, 'desk');
  check(byLink.holder === 'human' && byLink.by === other.body.id, `after the control link's takeover: ${JSON.stringify(byLink)}`);
  await shot(cp, 'desktop-04-control-link');
  // The link's person pastes through its ticket (no session): the timeline names their key.
  // And reads the VM's clipboard through it (Copy from VM), as the signed-in tab does.
  const forLink = 'for the link: \u00e9t\u00e9';
  fs.writeFileSync(path.join(berthd.clipboard, 'text'), forLink);
  await cp.getByRole('button', { name: 'Copy from VM' }).click();
  const linkCopy = cp.getByRole('dialog', { name: 'Copy from the VM' });
  const linkShown = linkCopy.getByLabel("The VM's clipboard");
  await waitFor('the VM\'s clipboard in the link\'s copy box', async () => (await linkShown.inputValue()) === forLink, 20_000);
  await linkCopy.getByRole('button', { name: 'Close' }).click();
  await linkCopy.waitFor({ state: 'hidden' });
  await cp.getByRole('button', { name: 'Paste into VM' }).click();
  const linkPaste = cp.getByRole('dialog', { name: 'Paste into the VM' });
  await linkPaste.getByLabel("Text for the VM's clipboard").fill('from the link \u2713');
  await linkPaste.getByRole('button', { name: "Send to the VM's clipboard" }).click();
  await cp.locator('.desk-pasted').waitFor();
  check(clipboardText(berthd) === 'from the link \u2713', `after the link's paste the guest's clipboard holds ${JSON.stringify(clipboardText(berthd))}`);
  const linkSet = await waitFor('the link\'s desktop_clipboard_set event', async () =>
    (await events(berthd, 'desk')).find((e) => e.type === 'desktop_clipboard_set' && e.actor === other.body.id), 10_000);
  check(linkSet.data?.holder === 'human', `the link's paste event: ${JSON.stringify(linkSet)}`);
  log('the control link pastes into the VM through its ticket');
  // The signed-in tab sees someone else hold control (berthd answers its ?wait=change).
  await page.locator('.desk-who').filter({ hasText: 'A person' }).waitFor({ timeout: 20_000 });
  await cp.getByRole('button', { name: 'Hand back' }).click();
  await cp.locator('.desk-who').filter({ hasText: 'You are watching' }).waitFor();
  check((await control(berthd, 'desk')).holder === 'agent', 'the control link did not hand back');
  await page.locator('.desk-who').filter({ hasText: 'The agent has control' }).waitFor({ timeout: 20_000 });
  log('a control link takes over and hands back; the tab followed both changes');
  await anon.close();
  await ctx.close();

  // --- Phone width, open before the agent asks for help: the request reaches the page pushed
  // (berthd answers the page's ?wait=change), its reason the agent's text, shown as text.
  // In the dark colour scheme, so the page's dark palette is checked (axe-core's contrast) too.
  const phone = await browser.newContext({ viewport: kViewports.phone, isMobile: true, hasTouch: true, colorScheme: 'dark' });
  const pp = await phone.newPage();
  pp.setDefaultTimeout(kStep);
  watchPage(pp, 'phone');
  const reason = 'Please sign in to GitHub <img src=x id=injected> & approve';
  await signIn(pp, base, berthd.key);
  const reads = [];
  const pushed = [];  // the answers to the page's ?wait=change reads
  pp.on('request', (r) => { if (/\/desktop\/control(\?|$)/.test(r.url()) && r.method() === 'GET') reads.push(new URL(r.url()).search); });
  pp.on('response', (r) => {
    if (/\/desktop\/control\?wait=change&revision=\d+/.test(r.url())) pushed.push(r.json().catch(() => null));
  });
  await pp.goto(`${base}/w/desk/desktop`);
  await checkScreen(pp, 'the phone');
  await waitFor('the page waiting on ?wait=change', async () => reads.some((q) => q.includes('wait=change')), 10_000);
  const asked = await berthd.api('POST', '/v1/workspaces/desk/desktop/control/request', { reason });
  check(asked.status === 200 && asked.body.request?.reason === reason, `the agent's request: ${asked.status} ${JSON.stringify(asked.body)}`);
  const banner = pp.locator('.help-request');
  await banner.waitFor();
  // Pushed, not polled: the request reached the page as the answer to its ?wait=change.
  const answers = await Promise.all(pushed);
  check(answers.some((a) => a?.request?.reason === reason), `no ?wait=change answer carried the request; the page's reads: ${reads.join(' | ')}`);
  const bannerText = await banner.innerText();
  check(bannerText.includes('The agent asks for help:') && bannerText.includes(reason), `the help banner: ${bannerText}`);
  check(await pp.locator('#injected').count() === 0, 'the agent\'s text was parsed as HTML');
  check(await banner.getByRole('button', { name: 'Take over' }).count() === 1, 'the help banner has no Take over button');
  await shot(pp, 'desktop-05-phone-help');
  // The banner's Take over takes control; handed back from the phone.
  await banner.getByRole('button', { name: 'Take over' }).click();
  await pp.locator('.desk-who').filter({ hasText: 'You have control' }).waitFor();
  await pp.locator('.desktop[data-mode="control"] .desk-conn.connected').waitFor();
  check((await control(berthd, 'desk')).holder === 'human', 'the banner\'s Take over did not take control');
  await shot(pp, 'desktop-06-phone-control');
  await pp.getByRole('button', { name: 'Hand back' }).click();
  await pp.locator('.desk-who').filter({ hasText: 'You are watching' }).waitFor();
  const answered = await control(berthd, 'desk');
  check(answered.holder === 'agent' && answered.request === null, `the phone's hand-back did not answer the request: ${JSON.stringify(answered)}`);
  await banner.waitFor({ state: 'detached' });
  await phone.close();
  log('the help request, pushed to the open page, is a plain-text banner with Take over; the hand-back answers it');

  // --- A workspace without a screen, and a stopped one.
  await makeWorkspace(berthd, 'nodesk');
  const ctx2 = await browser.newContext({ viewport: kViewports.laptop });
  const np = await ctx2.newPage();
  np.setDefaultTimeout(kStep);
  watchPage(np, 'no screen');
  await signIn(np, base, berthd.key);
  await np.goto(`${base}/w/nodesk/desktop`);
  const missing = np.getByRole('alert').filter({ hasText: 'The desktop is not available' });
  await missing.waitFor();
  log(`no screen: "${(await missing.innerText()).trim()}"`);
  await shot(np, 'desktop-07-no-screen');
  const stopped = await berthd.api('POST', '/v1/workspaces/nodesk/stop');
  check(stopped.status < 300, `stop: ${stopped.status}`);
  await np.getByRole('button', { name: 'Start', exact: true }).last().waitFor();
  await np.locator('.desk-off').getByText('stopped').waitFor();
  await shot(np, 'desktop-08-stopped');
  await np.locator('.desk-off').getByRole('button', { name: 'Start' }).click();
  await np.locator('.desk-off').waitFor({ state: 'detached' });
  log('a stopped workspace offers Start, and Start starts it');
  await ctx2.close();
}

async function main() {
  const dist = path.join(root, 'web', 'dist');
  if (!fs.existsSync(path.join(dist, 'desktop.html'))) {
    console.log(`FAIL ${T}: ${dist}/desktop.html is missing: build the web UI (scripts/setup, or npm run build in web/)`);
    return 1;
  }
  if (spawnSync('qemu-system-x86_64', ['--version']).status !== 0) {
    console.log(`FAIL ${T}: qemu-system-x86_64 is missing (scripts/setup installs it)`);
    return 1;
  }
  // A stray rejection (a route handler's, say) fails the run but never skips the cleanup below.
  process.on('unhandledRejection', (e) => problems.push(`unhandled rejection: ${e?.stack ?? e}`));
  const berthd = await startBerthd({ config: { web_root: dist }, clipboard: true });
  let browser = null;
  try {
    browser = await launchChromium();
    const started = Date.now();
    await run(browser, berthd, berthd.url);
    check(problems.length === 0, `the pages reported:\n${problems.join('\n')}`);
    check(a11y.length === 0, `axe-core found serious or critical violations:\n${a11y.join('\n')}`);
    console.log(`PASS ${T} (${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${opts.screenshots})`);
    return 0;
  } catch (e) {
    console.log(`FAIL ${T}: ${e instanceof Failure ? e.message : e.stack}`);
    if (problems.length) log(`the pages reported:\n${problems.join('\n')}`);
    try {
      log(`berthd's log (tail):\n${fs.readFileSync(berthd.logFile, 'utf8').split('\n').slice(-40).join('\n')}`);
    } catch {}
    return 1;
  } finally {
    if (browser) await browser.close().catch(() => {});
    await berthd.stop();
  }
}

process.exitCode = await main();
