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
//
//   BERTHD_BIN=… BERTH_AGENT_BIN=… [BERTH_CLI=…] node webui_bench.mjs [--runs N] [--workspaces N] [--out FILE]
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { startBerthd, waitFor } from '../../sdk/typescript/test/harness.mjs';
import { kViewports, launchChromium, signIn } from './webui_lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const { values: opts } = parseArgs({
  options: {
    runs: { type: 'string', default: '7' },
    workspaces: { type: 'string', default: '100' },
    out: { type: 'string', default: path.join(root, 'build', 'BENCHMARKS-webui.md') },
  },
});
const kRuns = Number(opts.runs);
const kWorkspaces = Number(opts.workspaces);
const kTargetBytes = 400 * 1000;

function log(m) {
  process.stderr.write(`webui-bench: ${m}\n`);
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const kb = (n) => `${(n / 1000).toFixed(1)} KB`;

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
  await ctx.close();
  const assets = [...signin, ...list, ...terminal].filter((r) => !new URL(r.url).pathname.startsWith('/v1/'));
  const unzipped = assets.filter((r) => /\.(js|css)$/.test(new URL(r.url).pathname) && r.encoding !== 'gzip');
  return { signin, list, terminal, assets, unzipped };
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

    const rows = [
      ['first load: the sign-in page (HTML, JS, CSS, icon)', kb(sum(load.signin)), '', ''],
      ['first load: everything to a terminal (+ xterm.js chunk and CSS)', kb(total), kb(kTargetBytes), `${(total / kTargetBytes).toFixed(2)}x of the target`],
      ['API answers on the way (session, processes; the list event stream not counted)', kb(apiBytes), '', ''],
      [`${kWorkspaces} workspaces shown, first visit (nothing cached), median of ${kRuns}`, `${median(cold).toFixed(0)} ms`,
        `${median(api).toFixed(1)} ms (GET /v1/workspaces from Node)`, `${(median(cold) / median(api)).toFixed(1)}x`],
      [`${kWorkspaces} workspaces shown, reload (assets cached), median of ${kRuns}`, `${median(warm).toFixed(0)} ms`,
        cli.length ? `${median(cli).toFixed(0)} ms (\`berth ls\`, a whole process)` : '', cli.length ? `${(median(warm) / median(cli)).toFixed(2)}x` : ''],
    ];
    const table = ['| measure | value | against | ratio |', '|---|---|---|---|', ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
    const extra = [
      `- cold runs (ms): ${cold.map((x) => x.toFixed(0)).join(', ')}; reloads: ${warm.map((x) => x.toFixed(0)).join(', ')}; API: ${api.map((x) => x.toFixed(1)).join(', ')}${cli.length ? `; berth ls: ${cli.map((x) => x.toFixed(0)).join(', ')}` : ''}`,
      `- JS/CSS sent without gzip: ${load.unzipped.length ? load.unzipped.map((r) => new URL(r.url).pathname).join(', ') : 'none'}`,
      `- load average at the end: ${os.loadavg().map((x) => x.toFixed(2)).join(' ')} (${os.cpus().length} cores)`,
    ].join('\n');
    const out = `${table}\n\n${extra}\n`;
    fs.mkdirSync(path.dirname(opts.out), { recursive: true });
    fs.writeFileSync(opts.out, out);
    console.log(out);
    if (total > kTargetBytes) console.log(`NOTE: the first load (${kb(total)}) is over the ${kb(kTargetBytes)} target`);
  } finally {
    if (browser) await browser.close().catch(() => {});
    await berthd.stop();
  }
}

await main();
