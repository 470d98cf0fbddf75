// E2B's JavaScript quick-start ported to Berth (test/e2b/): create, run a command, write and
// read a file, run a server and fetch it through its host, over https. The port is E2B's file
// with only the import and the class name changed, plus the lines marked "Berth:" (checked
// below); it runs as its own Node process, configured only by its environment, as a user's
// script would be: BERTH_URL and BERTH_API_KEY, BERTH_PREVIEW_DOMAIN (the https front of the
// previews), NODE_EXTRA_CA_CERTS (its certificate, made here) and test/localhost_dns.mjs
// standing in for the DNS record of the preview domain. The https front is the deployment
// docs/api.md describes as "a TLS proxy of the operator's in front of a plain listener"
// (berthd's `scheme: https` and `url_port`): a few lines of node:tls below.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import nodeTls from 'node:tls';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { startBerthd } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
let berthd;
let tls;
let front;
let berthdPort = 0;

before(async () => {
  const dir = fs.mkdtempSync('/tmp/berth-sdk-ts-tls-');
  tls = { dir, cert: path.join(dir, 'cert.pem'), key: path.join(dir, 'key.pem') };
  // A self-signed wildcard certificate for the preview domain (its own CA).
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2',
                           '-keyout', tls.key, '-out', tls.cert, '-subj', '/CN=*.preview.localhost',
                           '-addext', 'subjectAltName=DNS:*.preview.localhost'], { stdio: 'ignore' });
  // The TLS front: every connection piped to berthd's listener (Host passes unchanged).
  front = nodeTls.createServer({ cert: fs.readFileSync(tls.cert), key: fs.readFileSync(tls.key) }, (client) => {
    const upstream = net.connect(berthdPort, '127.0.0.1');
    client.pipe(upstream).pipe(client);
    const end = () => { client.destroy(); upstream.destroy(); };
    client.on('error', end);
    upstream.on('error', end);
  });
  await new Promise((r) => front.listen(0, '127.0.0.1', r));
  tls.port = front.address().port;
  berthd = await startBerthd({
    config: { preview: { domain: 'preview.localhost', scheme: 'https', url_port: tls.port } },
  });
  berthdPort = Number(new URL(berthd.url).port);
});

after(async () => {
  await berthd?.stop();
  front?.close();
  if (tls) fs.rmSync(tls.dir, { recursive: true, force: true });
});

test('the port differs from E2B\'s file only in the import, the class name and the marked lines', () => {
  const e2b = fs.readFileSync(path.join(here, 'e2b', 'quickstart.e2b.mjs'), 'utf8').split('\n');
  const port = fs.readFileSync(path.join(here, 'e2b', 'quickstart.berth.mjs'), 'utf8').split('\n');
  const marked = port.filter((l) => l.includes('// Berth:'));
  assert.equal(marked.length, 4);
  const code = (lines) => lines.filter((l) => l && !l.startsWith('//'));
  const unmarked = code(port).filter((l) => !l.includes('// Berth:'))
    .map((l) => l.replaceAll('Workspace', 'Sandbox').replace("'@berth/sdk'", "'e2b'"));
  const replaced = ['python -m http.server 3000', 'const response = await fetch(url);'];
  const original = code(e2b).filter((l) => !replaced.some((r) => l.includes(r)));
  assert.deepEqual(unmarked, original);
});

test('E2B\'s quick-start runs on Berth', async () => {
  // The file the quick-start writes lands on this host (the unix transport's "guest").
  const existed = fs.existsSync('/home/user');
  const child = spawn(process.execPath, ['--import', path.join(here, 'localhost_dns.mjs'),
                                         path.join(here, 'e2b', 'quickstart.berth.mjs')], {
    env: { ...process.env, BERTH_URL: berthd.url, BERTH_API_KEY: berthd.key,
           BERTH_PREVIEW_DOMAIN: `preview.localhost:${tls.port}`, NODE_EXTRA_CA_CERTS: tls.cert },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  const code = await new Promise((r) => child.on('exit', r));
  try {
    assert.equal(code, 0, out);
    assert.match(out, /^Hello from E2B Sandbox!\n/);
    assert.match(out, /\nHello, world!\n/);
    const started = /Server started at: (\S+)/.exec(out);
    assert.ok(started, out);
    assert.match(started[1], new RegExp(`^https://3000-ws-[0-9a-f]{8}\\.preview\\.localhost:${tls.port}$`));
    // python's http.server answers a directory listing of its cwd (the user's home).
    assert.match(out, /Response from server inside sandbox: <!DOCTYPE HTML>[\s\S]*Directory listing for \//, out);
  } finally {
    fs.rmSync('/home/user/my-file', { force: true });
    if (!existed) fs.rmSync('/home/user', { recursive: true, force: true });
  }
});
