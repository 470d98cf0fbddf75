#!/usr/bin/env node
// A web terminal survives a network blip: Chromium reaches a real berthd (--transport unix)
// only through a TCP proxy in this test; mid-session the proxy resets every connection (the
// PTY WebSocket, the live list, keep-alive requests) and refuses new ones for a few seconds.
// The terminal must say it lost the connection, reattach to the same PTY (the shell's $$ is
// unchanged), show the earlier output exactly once with no stray escape codes, and still
// echo what is typed. Twice in a row, so a second blip on a reattached session works too.
//
//   BERTHD_BIN=… BERTH_AGENT_BIN=… node terminal_blip.mjs [--screenshots DIR]
// Exit 0 PASS, 1 FAIL.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { startBerthd } from '../../sdk/typescript/test/harness.mjs';
import { Failure, check, kStep, kViewports, launchChromium, lines, shot, signIn, startProxy, waitForText } from './webui_lib.mjs';

const T = 'integration_webui_terminal_blip';
const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const kOutageMs = 3000;
const { values: opts } = parseArgs({ options: { screenshots: { type: 'string', default: path.join(root, 'build', 'Testing', 'webui-screenshots') } } });

function log(m) {
  process.stderr.write(`${T}: ${m}\n`);
}

// What a screen must not show after a replay: raw escapes, or the caret forms of them.
const kStray = /\x1b|\^\[|\[\?\d+[hl]|\[\d+;\d+R/;

async function blip(page, proxy, marker, shellPid) {
  const status = page.locator('.term-pane .term-status');
  const dropped = proxy.dropAll(kOutageMs);
  log(`reset ${dropped} connections through the proxy; refusing new ones for ${kOutageMs} ms`);
  check(dropped > 0, 'no connection went through the proxy to drop');
  await status.filter({ hasText: /connection lost|reattaching/ }).waitFor({ timeout: 10_000 })
    .catch(() => { throw new Failure('the terminal never said it lost the connection'); });
  const lostAt = Date.now();
  await page.locator('.term-pane .term-status', { hasText: /^connected$/ }).waitFor({ timeout: kStep });
  log(`reattached ${((Date.now() - lostAt) / 1000).toFixed(1)} s after the drop was noticed`);

  const screen = await waitForText(page, `the replay of ${marker}`, (t) => lines(t).some((l) => l.trim() === marker));
  const copies = lines(screen).filter((l) => l.trim() === marker).length;
  check(copies === 1, `after the blip "${marker}" is shown ${copies} times:\n${screen}`);
  check(!kStray.test(screen), `stray escape codes after the blip:\n${JSON.stringify(screen)}`);
  check(await page.locator('.term-pane').count() === 1, 'after the blip there is more than one terminal');

  // The same shell (its pid), and it still echoes: one answer more than before.
  const answers = (t) => lines(t).filter((l) => /^pid=\d+ sum=42$/.test(l.trim())).length;
  const had = answers(screen);
  await page.locator('.term-host').first().click();
  await page.keyboard.type('echo pid=$$ sum=$((40+2))');
  await page.keyboard.press('Enter');
  const after = await waitForText(page, 'the shell to answer after the blip', (t) => answers(t) === had + 1);
  const pid = lines(after).map((l) => /^pid=(\d+) sum=42$/.exec(l.trim())).filter(Boolean).at(-1)[1];
  check(pid === shellPid, `after the blip the shell is pid ${pid}, not ${shellPid}: a new PTY, not the same one`);
  return after;
}

async function run(browser, berthd, screenshots) {
  const proxy = await startProxy(berthd.url);
  const problems = [];
  try {
    const made = await berthd.api('POST', '/v1/workspaces', { name: 'blip' });
    check(made.status === 201, `create: ${made.status} ${JSON.stringify(made.body)}`);
    const ready = await berthd.api('POST', '/v1/workspaces/blip/wait', { state: 'running', timeout_s: 60 });
    check(ready.status === 200, `wait: ${ready.status} ${JSON.stringify(ready.body)}`);

    const ctx = await browser.newContext({ viewport: kViewports.laptop });
    const page = await ctx.newPage();
    page.setDefaultTimeout(kStep);
    page.on('pageerror', (e) => problems.push(`uncaught: ${e.message}`));
    await signIn(page, proxy.url, berthd.key);
    await page.goto(`${proxy.url}/w/blip/terminal`);
    await page.locator('.term-pane .term-status', { hasText: /^connected$/ }).waitFor();
    await waitForText(page, 'a prompt', (t) => /[$#>]\s*$/m.test(lines(t).filter(Boolean).join('\n')));
    await page.locator('.term-host').first().click();
    // Colour and cursor movement in the earlier output, so a replay that mangles escapes shows.
    await page.keyboard.type("printf '\\033[1;32mgreen-%s\\033[0m\\n' ok; echo before-blip; echo pid=$$");
    await page.keyboard.press('Enter');
    const before = await waitForText(page, 'before-blip', (t) => lines(t).some((l) => /^pid=\d+$/.test(l.trim())));
    const shellPid = lines(before).map((l) => /^pid=(\d+)$/.exec(l.trim())).filter(Boolean).at(-1)[1];
    log(`the shell is pid ${shellPid}; ${proxy.open()} connections open through the proxy`);

    let screen = await blip(page, proxy, 'before-blip', shellPid);
    check(lines(screen).filter((l) => l.trim() === 'green-ok').length === 1, `"green-ok" is not shown once:\n${screen}`);
    await shot(page, screenshots, '20-terminal-after-blip');

    // A second blip, on the reattached session.
    screen = await blip(page, proxy, 'before-blip', shellPid);
    const sums = lines(screen).filter((l) => /^pid=\d+ sum=42$/.test(l.trim())).length;
    check(sums === 2, `after the second blip the answers to the two commands typed since show ${sums} times, not 2:\n${screen}`);
    log('two blips: the same PTY each time, its output once, no stray escapes, input echoed');

    // The live list came back too (its EventSource went through the proxy).
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Workspaces' }).click();
    await page.locator('tr[data-workspace="blip"]').getByText('running', { exact: true }).waitFor();
    await page.locator('.stream.live').waitFor();
    await ctx.close();
    check(problems.length === 0, `the page reported:\n${problems.join('\n')}`);
    log(`${proxy.accepted()} connections went through the proxy in all`);
  } finally {
    proxy.close();
  }
}

async function main() {
  const dist = path.join(root, 'web', 'dist');
  if (!fs.existsSync(path.join(dist, 'index.html'))) {
    console.log(`FAIL ${T}: ${dist}/index.html is missing: build it (scripts/setup, or npm run build in web/)`);
    return 1;
  }
  const berthd = await startBerthd({ config: { web_root: dist } });
  let browser = null;
  try {
    browser = await launchChromium();
    const started = Date.now();
    await run(browser, berthd, opts.screenshots);
    console.log(`PASS ${T} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
    return 0;
  } catch (e) {
    console.log(`FAIL ${T}: ${e instanceof Failure ? e.message : e.stack}`);
    try {
      log(`berthd's log (tail):\n${fs.readFileSync(berthd.logFile, 'utf8').split('\n').slice(-30).join('\n')}`);
    } catch {}
    return 1;
  } finally {
    if (browser) await browser.close().catch(() => {});
    await berthd.stop();
  }
}

process.exitCode = await main();
