// Shared by the web UI's browser tests (webui.mjs, terminal_blip.mjs) and its benchmark
// (bench/run-webui-bench): Debian's Chromium through playwright-core, signing in, reading the
// xterm.js screen, the axe-core check, and a TCP proxy that can drop every connection.
import fs from 'node:fs';
import net from 'node:net';
import { createRequire } from 'node:module';
import path from 'node:path';

import { chromium } from 'playwright-core';

export const kStep = 60_000;  // any one step; a workspace on --transport unix runs in a second or two
export const kViewports = { laptop: { width: 1366, height: 768 }, phone: { width: 390, height: 844 } };

export class Failure extends Error {}
export function check(ok, what) {
  if (!ok) throw new Failure(what);
}

export async function launchChromium() {
  const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  return chromium.launch({
    executablePath: process.env.BERTH_CHROMIUM || '/usr/bin/chromium', headless: true, chromiumSandbox: !asRoot, timeout: 60000,
  });
}

export async function signIn(page, base, key) {
  await page.goto(base);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Workspaces' }).waitFor({ timeout: kStep });
}

export async function termText(page, pane = 0) {
  return page.locator('.term-host .xterm-rows').nth(pane).innerText();
}

export const lines = (text) => text.split('\n').map((l) => l.replace(/\u00a0/g, ' ').trimEnd());

export async function waitForText(page, what, pred, { timeout = kStep, pane = 0 } = {}) {
  const deadline = Date.now() + timeout;
  let last = '';
  while (Date.now() < deadline) {
    last = await termText(page, pane).catch(() => '');
    if (pred(last)) return last;
    await page.waitForTimeout(100);
  }
  throw new Failure(`timed out waiting for ${what}; the terminal shows:\n${last}`);
}

// axe-core's source, evaluated in the page (CDP's evaluate is not subject to the page's CSP,
// which refuses an injected <script>).
const axeSource = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** axe-core on the page as it is now: the serious and critical violations, as text lines. */
export async function axeViolations(page) {
  const loaded = await page.evaluate(() => typeof window.axe !== 'undefined');
  if (!loaded) await page.evaluate(axeSource);
  const result = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({
      id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.slice(0, 5).map((n) => `${n.target.join(' ')}: ${n.failureSummary?.split('\n').slice(1).join(' ').trim()}`),
    }));
  });
  return result.filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id} (${v.help}):\n    ${v.nodes.join('\n    ')}`);
}

/** Writes a screenshot NAME-WxH.png to dir. */
export async function shot(page, dir, name) {
  fs.mkdirSync(dir, { recursive: true });
  const vp = page.viewportSize();
  const file = path.join(dir, `${name}-${vp.width}x${vp.height}.png`);
  await page.screenshot({ path: file });
  return file;
}

/**
 * A TCP proxy on 127.0.0.1 to `target` (http://HOST:PORT). dropAll() resets every connection
 * through it and refuses new ones for `refuseMs`: the network blip a laptop sees.
 */
export async function startProxy(target) {
  const { hostname, port } = new URL(target);
  const pairs = new Set();
  let refuseUntil = 0;
  let accepted = 0;
  const server = net.createServer((client) => {
    if (Date.now() < refuseUntil) {
      client.resetAndDestroy();
      return;
    }
    accepted += 1;
    const upstream = net.connect(Number(port), hostname);
    const pair = { client, upstream };
    pairs.add(pair);
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    open: () => pairs.size,
    accepted: () => accepted,
    dropAll(refuseMs = 0) {
      refuseUntil = Date.now() + refuseMs;
      const n = pairs.size;
      for (const { client, upstream } of [...pairs]) {
        client.resetAndDestroy();
        upstream.destroy();
      }
      pairs.clear();
      return n;
    },
    close() {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      server.close();
    },
  };
}
