// The Node side of bench/run-sdk-bench, run as a child process of it (so that its memory is its
// own): one subcommand a measurement, one JSON line on stdout.
//
//   exec WS N          N round trips of `true` each way, in blocks that take turns: the SDK
//                      (ws.commands.run, which reads the NDJSON stream), a bare fetch() with the
//                      SDK's body and Accept header, and the same bare request answered as plain
//                      JSON (what a user writing it by hand sends). Times in ms.
//   upload WS SRC DST [READ]
//                      ws.files.upload(DST, fs.createReadStream(SRC)), reading READ bytes at a
//                      time (default: Node's, 64 KiB): seconds and CPU seconds of the call,
//                      and the process's peak RSS (resourceUsage().maxRSS) after imports and a
//                      first call, and after the upload.
//
// Configured by BERTH_URL and BERTH_API_KEY; the SDK from sdk/typescript/dist of this checkout
// (run-sdk-bench builds it).
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { Workspace } from '../sdk/typescript/dist/index.js';

// Each way runs this many round trips before the next way takes its turn (as in the Python
// client): bursts of load on a shared machine hit all of them alike.
const kBlock = 5;
const kWarmUp = 20;

const maxRss = () => process.resourceUsage().maxRSS * 1024;

async function bareExec(url, key, ndjson) {
  const headers = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
  if (ndjson) headers.Accept = 'application/x-ndjson';
  const r = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ cmd: 'true' }) });
  const text = await r.text();
  if (r.status !== 200) throw new Error(`exec: ${r.status} ${text.slice(0, 200)}`);
  const last = JSON.parse(ndjson ? text.trimEnd().split('\n').pop() : text);
  if (last.exit_code !== 0) throw new Error(`exec: ${text.slice(0, 200)}`);
}

async function measureExec(name, n) {
  const ws = await Workspace.connect(name);
  const url = `${process.env.BERTH_URL.replace(/\/+$/, '')}/v1/workspaces/${ws.id}/exec`;
  const key = process.env.BERTH_API_KEY;
  const ways = {
    sdk: async () => {
      if ((await ws.commands.run('true')).exitCode !== 0) throw new Error('sdk exec failed');
    },
    bare_ndjson: () => bareExec(url, key, true),
    bare_json: () => bareExec(url, key, false),
  };
  const times = Object.fromEntries(Object.keys(ways).map((k) => [k, []]));
  for (const fn of Object.values(ways)) for (let i = 0; i < kWarmUp; i++) await fn();
  while (times.sdk.length < n) {
    for (const [k, fn] of Object.entries(ways)) {
      for (let i = 0; i < Math.min(kBlock, n - times[k].length); i++) {
        const t0 = performance.now();
        await fn();
        times[k].push(performance.now() - t0);
      }
    }
  }
  return times;
}

async function measureUpload(name, src, dst, read) {
  const ws = await Workspace.connect(name);
  await ws.files.write(`${dst}.warm`, 'warm');  // imports done, a connection open: the baseline
  await ws.files.remove(`${dst}.warm`);
  const base = maxRss();
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const info = await ws.files.upload(dst, fs.createReadStream(src, read ? { highWaterMark: read } : {}));
  const seconds = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  return { seconds, cpu: (c.user + c.system) / 1e6, size: info.size, base_rss: base, peak_rss: maxRss() };
}

const [what, ...args] = process.argv.slice(2);
let out;
if (what === 'exec') out = await measureExec(args[0], Number(args[1]));
else if (what === 'upload') out = await measureUpload(args[0], args[1], args[2], Number(args[3] ?? 0));
else throw new Error(`unknown measurement ${what}`);
console.log(JSON.stringify(out));
