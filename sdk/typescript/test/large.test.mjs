// A 64 MiB upload and download through the SDK with the client's memory staying flat: the
// file is made by a generator as it is sent and hashed as it arrives, never held whole, and
// process.memoryUsage().rss, sampled every 20 ms (each sample after a full GC, so garbage
// does not count as held), must grow far less than the file.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { Readable } from 'node:stream';
import v8 from 'node:v8';
import vm from 'node:vm';
import { after, before, test } from 'node:test';
import { startBerthd } from './harness.mjs';
import { Workspace } from '../dist/index.js';

const kSize = 64 << 20;
const kChunk = 1 << 20;
// The client's RSS may grow by at most this while 64 MiB pass through it, either way: a quarter
// of the file, where an SDK that held it whole would grow by all of it. Measured: 0-2 MiB.
// (Readable.from buffers 16 chunks by default: the test asks it for 2.)
const kMaxGrowth = 16 << 20;

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');

let berthd;
before(async () => { berthd = await startBerthd(); });
after(async () => { await berthd?.stop(); });

function sampler() {
  gc();
  const base = process.memoryUsage().rss;
  let peak = base;
  let buffers = 0;
  const timer = setInterval(() => {
    gc();
    const m = process.memoryUsage();
    peak = Math.max(peak, m.rss);
    buffers = Math.max(buffers, m.arrayBuffers);
  }, 20);
  return { stop: () => { clearInterval(timer); return { base, peak, growth: peak - base, buffers }; } };
}

// One-MiB chunks (64 unless told), each different (its index, then its index's low byte), made
// as they are read, in a ring of 8 buffers: a source that allocates a new buffer per chunk
// leaves V8 64 MiB of garbage to sweep at its own pace, which would measure V8, not the SDK.
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

test('64 MiB up (Readable) and down (async iterable) with a flat RSS', async () => {
  const ws = await Workspace.create({ apiUrl: berthd.url, apiKey: berthd.key, name: 'sdk-large' });
  const path = `${berthd.tmp}/big.bin`;
  // Warm up with a 16 MiB round trip on the same paths, so the baseline already has what any
  // transfer costs once (JIT, V8's heap, malloc's arenas): what grows after it is per byte.
  await ws.files.upload(`${berthd.tmp}/warm.bin`, Readable.from(generated(createHash('sha256'), 16), { highWaterMark: 2 }));
  for await (const c of await ws.files.download(`${berthd.tmp}/warm.bin`)) void c;

  const up = sampler();
  const sent = createHash('sha256');
  const info = await ws.files.upload(path, Readable.from(generated(sent), { highWaterMark: 2 }));
  const upMem = up.stop();
  assert.equal(info.size, kSize);
  assert.equal(fs.statSync(path).size, kSize);

  const down = sampler();
  const got = createHash('sha256');
  let bytes = 0;
  for await (const chunk of await ws.files.download(path)) {
    got.update(chunk);
    bytes += chunk.length;
  }
  const downMem = down.stop();
  assert.equal(bytes, kSize);
  assert.equal(got.digest('hex'), sent.digest('hex'));
  const mib = (n) => `${(n / 1048576).toFixed(1)} MiB`;
  console.log(`# upload: RSS ${mib(upMem.base)} -> peak ${mib(upMem.peak)} (+${mib(upMem.growth)}, buffers ${mib(upMem.buffers)}); ` +
              `download: ${mib(downMem.base)} -> ${mib(downMem.peak)} (+${mib(downMem.growth)}, buffers ${mib(downMem.buffers)})`);
  assert.ok(upMem.growth < kMaxGrowth, `upload grew RSS by ${mib(upMem.growth)}`);
  assert.ok(downMem.growth < kMaxGrowth, `download grew RSS by ${mib(downMem.growth)}`);
  await ws.delete();
});
