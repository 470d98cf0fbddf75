// A 1 GiB upload and download through the SDK with the client's memory staying flat: the
// file is made by a generator as it is sent and hashed as it arrives, never held whole. Two
// measures, each against a baseline taken after a warm-up: what the process holds
// (process.memoryUsage().rss sampled every 20 ms, each sample after a full GC, so garbage does
// not count) and its peak RSS as the kernel counts it (process.resourceUsage().maxRSS, the
// high-water mark: garbage between collections included, no sample can miss it).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { Readable } from 'node:stream';
import v8 from 'node:v8';
import vm from 'node:vm';
import { after, before, test } from 'node:test';
import { startBerthd } from './harness.mjs';
import { Workspace } from '../dist/index.js';

const kSize = 1 << 30;
const kChunk = 1 << 20;
// What the client holds may grow by at most this while 1 GiB passes through it, either way,
// where an SDK that held the file whole would grow by all of it. (Readable.from buffers 16
// chunks by default: the test asks it for 2.)
const kMaxHeld = 16 << 20;
// Its peak RSS (garbage not yet collected included) may rise by at most this: 1/16 of the file.
const kMaxPeak = 64 << 20;

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');

let berthd;
before(async () => { berthd = await startBerthd(); });
after(async () => { await berthd?.stop(); });

// The process's peak RSS so far (the kernel's high-water mark), in bytes.
const maxRss = () => process.resourceUsage().maxRSS * 1024;

function sampler() {
  gc();
  const base = process.memoryUsage().rss;
  const baseMax = maxRss();
  let peak = base;
  let buffers = 0;
  const timer = setInterval(() => {
    gc();
    const m = process.memoryUsage();
    peak = Math.max(peak, m.rss);
    buffers = Math.max(buffers, m.arrayBuffers);
  }, 20);
  return {
    stop: () => {
      clearInterval(timer);
      return { base, peak, growth: peak - base, buffers, maxRose: maxRss() - baseMax };
    },
  };
}

// One-MiB chunks (1024 unless told), each different (its index, then its index's low byte), made
// as they are read, in a ring of 8 buffers: a source that allocates a new buffer per chunk
// leaves V8 1 GiB of garbage to sweep at its own pace, which would measure V8, not the SDK.
// Each buffer comes round again only after 7 more chunks were asked for; were the SDK still
// holding it, the bytes sent would change under it and the downloaded hash would not match.
async function* generated(hash, chunks = kSize / kChunk) {
  const ring = Array.from({ length: 8 }, () => new Uint8Array(kChunk));
  for (let i = 0; i < chunks; i++) {
    const chunk = ring[i % ring.length];
    chunk.fill(i & 0xff);
    new DataView(chunk.buffer).setUint32(0, i);
    hash.update(chunk);
    yield chunk;
  }
}

test('1 GiB up (Readable) and down (async iterable): bytes intact, held memory and peak RSS flat', async () => {
  const ws = await Workspace.create({ apiUrl: berthd.url, apiKey: berthd.key, name: 'sdk-large' });
  const path = `${berthd.tmp}/big.bin`;
  // Warm up with a 16 MiB round trip on the same paths, so the baseline already has what any
  // transfer costs once (JIT, V8's heap, malloc's arenas): what grows after it is per byte.
  await ws.files.upload(`${berthd.tmp}/warm.bin`, Readable.from(generated(createHash('sha256'), 16), { highWaterMark: 2 }));
  for await (const c of await ws.files.download(`${berthd.tmp}/warm.bin`)) void c;

  const up = sampler();
  const sent = createHash('sha256');
  let t = performance.now();
  const info = await ws.files.upload(path, Readable.from(generated(sent), { highWaterMark: 2 }));
  const upSeconds = (performance.now() - t) / 1000;
  const upMem = up.stop();
  assert.equal(info.size, kSize);
  assert.equal(fs.statSync(path).size, kSize);

  const down = sampler();
  const got = createHash('sha256');
  let bytes = 0;
  t = performance.now();
  for await (const chunk of await ws.files.download(path)) {
    got.update(chunk);
    bytes += chunk.length;
  }
  const downSeconds = (performance.now() - t) / 1000;
  const downMem = down.stop();
  fs.rmSync(path);
  fs.rmSync(`${berthd.tmp}/warm.bin`);
  assert.equal(bytes, kSize);
  assert.equal(got.digest('hex'), sent.digest('hex'));
  const mib = (n) => `${(n / 1048576).toFixed(1)} MiB`;
  const rate = (s) => `${s.toFixed(1)} s, ${(kSize / 1048576 / s).toFixed(0)} MiB/s`;
  for (const [what, m, s] of [['upload', upMem, upSeconds], ['download', downMem, downSeconds]]) {
    console.log(`# ${what}: ${rate(s)}; held RSS ${mib(m.base)} -> ${mib(m.peak)} (+${mib(m.growth)}, ` +
                `buffers ${mib(m.buffers)}); peak RSS +${mib(m.maxRose)}`);
    assert.ok(m.growth < kMaxHeld, `${what} grew held RSS by ${mib(m.growth)}`);
    assert.ok(m.maxRose < kMaxPeak, `${what} raised peak RSS by ${mib(m.maxRose)}`);
  }
  await ws.delete();
});
