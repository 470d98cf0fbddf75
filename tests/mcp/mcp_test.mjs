// Berth's MCP server driven by a client that is not ours: the official MCP TypeScript SDK.
//
// Starts berthd (--transport unix: a real berth-agent per workspace as a host process, no VM),
// makes a tenant and a write key, then over stdio (`berth mcp`) and over streamable HTTP
// (berthd's /mcp) lists the tools, creates a workspace, runs commands, writes, reads and edits
// a file, reads a bad path (a tool error, isError), runs a background process, and sends
// malformed JSON-RPC (JSON-RPC errors back, the server still answering afterwards).
//
// node tests/mcp/mcp_test.mjs --berthd=PATH --agent=PATH --stdio-bin=PATH [--stdio-subcommand=mcp]
// (CTest passes these; see tests/integration/CMakeLists.mcp.cmake.)
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

// ---- arguments and the SDK ----------------------------------------------------------------

const args = {};
for (const arg of process.argv.slice(2)) {
  const match = /^--([a-z-]+)=(.*)$/.exec(arg);
  if (!match) {
    console.error(`bad argument ${arg} (want --name=value)`);
    process.exit(2);
  }
  args[match[1]] = match[2];
}
for (const required of ['berthd', 'agent', 'stdio-bin']) {
  if (!args[required]) {
    console.error(`missing --${required}=PATH`);
    process.exit(2);
  }
}

let sdk;
try {
  sdk = {
    ...(await import('@modelcontextprotocol/sdk/client/index.js')),
    ...(await import('@modelcontextprotocol/sdk/client/stdio.js')),
    ...(await import('@modelcontextprotocol/sdk/client/streamableHttp.js')),
    ...(await import('@modelcontextprotocol/sdk/types.js')),
  };
} catch (e) {
  console.error(`cannot load @modelcontextprotocol/sdk (${e.message}): run \`npm ci\` in tests/mcp ` +
                '(scripts/setup does)');
  process.exit(1);
}

const EXPECTED_TOOLS = [
  'workspace_create', 'workspace_list', 'workspace_get', 'workspace_start', 'workspace_stop',
  'workspace_hibernate', 'workspace_delete', 'workspace_use', 'exec', 'process_list',
  'process_output', 'process_kill', 'file_read', 'file_write', 'file_edit', 'file_list',
  'file_delete', 'ports_list', 'preview_url', 'network_policy', 'desktop_screenshot', 'desktop_act',
  'desktop_control', 'request_human', 'workspace_events', 'desktop_clipboard',
  'checkpoint_create', 'checkpoint_list', 'checkpoint_restore', 'checkpoint_diff', 'template_list',
];

// ---- small helpers -------------------------------------------------------------------------

let passed = 0;
let failed = 0;
async function step(name, fn) {
  const started = Date.now();
  try {
    await fn();
    passed++;
    console.log(`ok   ${name} (${Date.now() - started} ms)`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.stack || e}`);
  }
}

// Waits for `check` to return a truthy value, polling until the deadline (no fixed sleeps).
async function waitFor(what, check, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (let pause = 10; ; pause = Math.min(pause * 2, 250)) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await delay(pause);
  }
}

function readTrimmed(file) {
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    return '';
  }
}

function text(result) {
  return (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// A tool call that must succeed.
async function call(client, name, args) {
  const result = await client.callTool({ name, arguments: args });
  assert.notEqual(result.isError, true, `${name} failed: ${text(result)}`);
  return result;
}

// A tool call that must fail cleanly: a result with isError, not a protocol error.
async function callFails(client, name, args, pattern) {
  const result = await client.callTool({ name, arguments: args });
  assert.equal(result.isError, true, `${name} should have failed: ${text(result)}`);
  assert.match(text(result), pattern);
  return result;
}

// ---- berthd --------------------------------------------------------------------------------

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-mcp-test-'));
const dataDir = path.join(tmp, 'data');
fs.mkdirSync(dataDir);

// A stand-in guest image "base" (as tests/support/test_berthd.cc makes it): a small real qcow2
// for the overlays and empty kernel files. The unix transport boots nothing.
const imageDir = path.join(dataDir, 'images', 'base', 'v1');
fs.mkdirSync(imageDir, { recursive: true });
const qemuImg = spawn('qemu-img', ['create', '-q', '-f', 'qcow2', path.join(imageDir, 'disk.qcow2'), '1G'],
                      { stdio: 'inherit' });
const qemuImgCode = await new Promise((resolve) => {
  qemuImg.on('exit', resolve);
  qemuImg.on('error', () => resolve(-1));
});
if (qemuImgCode !== 0) {
  console.error('qemu-img create failed (is qemu-utils installed?)');
  process.exit(1);
}
fs.writeFileSync(path.join(imageDir, 'vmlinuz'), '');
fs.writeFileSync(path.join(imageDir, 'initrd.img'), '');
fs.writeFileSync(path.join(imageDir, 'image.json'), '{}');
fs.symlinkSync('v1', path.join(dataDir, 'images', 'base', 'current'));
const logFile = path.join(tmp, 'berthd.log');
const log = fs.openSync(logFile, 'w');
// New disks refused only below 1 GiB free: berthd's default floor (5 GiB and 5 %) is for hosts
// it owns; a CI machine shares a big disk of which a few percent may be free.
const configFile = path.join(tmp, 'config.json');
fs.writeFileSync(configFile, JSON.stringify({ min_free_disk: { bytes: 2 ** 30, percent: 0 } }));
const berthd = spawn(args.berthd, [
  '--config', configFile,
  '--listen', '127.0.0.1:0', '--data', dataDir, '--libvirt-uri', 'test:///default',
  '--transport', 'unix', '--agent-bin', args.agent,
  // Host agents run commands as this user (the guest images' 'agent' user is not on the host).
  '--agent-user', os.userInfo().username,
], { stdio: ['ignore', log, log] });
let berthdExited = null;
berthd.on('exit', (code, signal) => { berthdExited = { code, signal }; });

async function stopBerthd() {
  if (berthdExited) return;
  berthd.kill('SIGTERM');
  try {
    await waitFor('berthd to exit', () => berthdExited, 20_000);
  } catch {
    berthd.kill('SIGKILL');
  }
}

let url;
let key;

async function api(method, route, body, token = key) {
  const response = await fetch(url + route, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const answer = await response.text();
  if (!response.ok) throw new Error(`${method} ${route}: ${response.status} ${answer}`);
  return answer ? JSON.parse(answer) : {};
}

// Deletes every workspace of the test's tenant: a deleted workspace's host agent stops.
async function deleteWorkspaces() {
  if (!url || !key || berthdExited) return;
  try {
    for (const ws of (await api('GET', '/v1/workspaces')).workspaces) {
      await api('DELETE', `/v1/workspaces/${ws.id}`).catch(() => {});
    }
    await waitFor('the workspaces to be deleted',
                  async () => (await api('GET', '/v1/workspaces')).workspaces.length === 0, 30_000);
  } catch (e) {
    console.log(`note: cleanup: ${e.message}`);
  }
}

// Host agents outlive berthd by design (as VMs do), so anything still running from this
// test's directory is ended here, by pid.
function killLeftovers() {
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    let cmdline = '';
    try {
      cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (cmdline.includes(tmp) && Number(pid) !== process.pid) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {}
    }
  }
}

// ---- the scenario both transports run --------------------------------------------------------

async function scenario(client, label) {
  const wsName = `mcp-${label}`;
  const dir = path.join(tmp, `files-${label}`);
  const file = path.join(dir, 'notes', 'hello.txt');

  await step(`${label}: server info and capabilities`, async () => {
    assert.equal(client.getServerVersion().name, 'berth');
    assert.ok(client.getServerCapabilities().tools, 'tools capability');
    assert.match(client.getInstructions() ?? '', /workspace_create/);
  });

  await step(`${label}: tools/list names every tool with an object schema`, async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), [...EXPECTED_TOOLS].sort());
    for (const tool of tools) {
      assert.equal(tool.inputSchema.type, 'object', tool.name);
      assert.ok(tool.description.length > 40, tool.name);
    }
  });

  await step(`${label}: a call before any workspace is chosen explains what to do`, async () => {
    await callFails(client, 'exec', { cmd: 'true' }, /workspace_use/);
  });

  let created = false;
  await step(`${label}: workspace_create waits until running and becomes the default`, async () => {
    const result = await call(client, 'workspace_create', { name: wsName });
    assert.equal(result.structuredContent?.state, 'running', text(result));
    assert.equal(result.structuredContent?.name, wsName);
    const got = await call(client, 'workspace_get', {});
    assert.equal(got.structuredContent?.name, wsName);
    created = true;
  });
  if (!created) return wsName;  // everything below needs the workspace

  await step(`${label}: exec runs a shell string and reports output and exit code`, async () => {
    const result = await call(client, 'exec', { cmd: 'echo hello-$((6*7)); echo oops >&2; exit 3' });
    assert.match(text(result), /exit code 3/);
    assert.match(text(result), /hello-42/);
    assert.equal(result.structuredContent?.exit_code, 3);
    assert.match(result.structuredContent?.stderr ?? '', /oops/);
  });

  await step(`${label}: exec runs an argv array, in a workspace named explicitly`, async () => {
    const result = await call(client, 'exec', {
      cmd: ['sh', '-c', 'printf "%s" "$0"', 'argv-form'], workspace: wsName,
    });
    assert.equal(result.structuredContent?.stdout, 'argv-form');
  });

  await step(`${label}: exec's timeout kills the command`, async () => {
    const result = await call(client, 'exec', { cmd: 'sleep 30', timeout: 1 });
    assert.equal(result.structuredContent?.timed_out, true, text(result));
  });

  await step(`${label}: file_write then file_read returns the same text`, async () => {
    const content = 'line one\nline two: café\nline three\n';
    await call(client, 'file_write', { path: file, content });
    const read = await call(client, 'file_read', { path: file });
    assert.equal(read.content[0].text, content);
    assert.equal(fs.readFileSync(file, 'utf8'), content);
  });

  await step(`${label}: file_read is bounded and says where to go on`, async () => {
    const read = await call(client, 'file_read', { path: file, offset: 5, max_bytes: 8 });
    assert.equal(read.content[0].text, 'one\nline');
    assert.match(text(read), /offset=13/);
  });

  await step(`${label}: file_edit replaces a unique string`, async () => {
    const edit = await call(client, 'file_edit', {
      path: file, old_string: 'line two', new_string: 'LINE 2',
    });
    assert.match(text(edit), /Replaced 1 occurrence/);
    const read = await call(client, 'file_read', { path: file });
    assert.equal(read.content[0].text, 'line one\nLINE 2: café\nline three\n');
  });

  await step(`${label}: file_edit refuses 0 and >1 matches, changing nothing`, async () => {
    await callFails(client, 'file_edit', { path: file, old_string: 'line', new_string: 'x' },
                    /occurs 2 times/);
    await callFails(client, 'file_edit', { path: file, old_string: 'absent', new_string: 'x' },
                    /does not occur/);
    assert.equal(fs.readFileSync(file, 'utf8'), 'line one\nLINE 2: café\nline three\n');
  });

  await step(`${label}: a bad path is a clean tool error`, async () => {
    await callFails(client, 'file_read', { path: path.join(dir, 'no', 'such', 'file') }, /not_found/);
    await callFails(client, 'file_read', { path: '/../etc/passwd' }, /bad path/);
  });

  await step(`${label}: binary files are reported, not shown`, async () => {
    await call(client, 'exec', { cmd: ['sh', '-c', `head -c 64 /dev/urandom > ${dir}/blob.bin`] });
    const read = await call(client, 'file_read', { path: `${dir}/blob.bin` });
    assert.match(text(read), /binary file \(64 bytes\)/);
  });

  await step(`${label}: file_list shows the directory`, async () => {
    const list = await call(client, 'file_list', { path: path.join(dir, 'notes') });
    assert.match(text(list), /hello\.txt/);
    assert.equal(list.structuredContent?.entries?.[0]?.name, 'hello.txt');
  });

  await step(`${label}: background process: start, list, read output, kill`, async () => {
    const started = await call(client, 'exec', {
      cmd: 'echo started; sleep 60', background: true, tag: `bg-${label}`,
    });
    assert.ok(started.structuredContent?.pid > 0, text(started));
    const list = await call(client, 'process_list', {});
    assert.match(text(list), new RegExp(`bg-${label}`));
    const output = await waitFor('background output', async () => {
      const r = await call(client, 'process_output', { id: `bg-${label}` });
      return /started/.test(r.structuredContent?.stdout ?? '') ? r : null;
    }, 20_000);
    assert.equal(output.structuredContent?.status, 'running', text(output));
    assert.equal(output.structuredContent?.pid, started.structuredContent.pid);
    await call(client, 'process_kill', { id: `bg-${label}` });
    const ended = await call(client, 'process_output', { id: `bg-${label}`, wait: 10 });
    assert.equal(ended.structuredContent?.status, 'exited', text(ended));
    assert.doesNotMatch(text(ended), /still running/);
  });

  await step(`${label}: ports_list shows a port listening in the workspace; workspace_list it`,
             async () => {
    // On the unix transport the workspace's "guest" is this host: a server of ours is in it.
    const server = net.createServer((socket) => socket.end());
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = server.address().port;
    try {
      const ports = await call(client, 'ports_list', {});
      const ours = ports.structuredContent.ports.filter((p) => p.port === port);
      assert.equal(ours.length, 1, text(ports));
      assert.equal(ours[0].address, '127.0.0.1');
      assert.equal(ours[0].pid, process.pid);
      assert.match(text(ports), new RegExp(`- 127\\.0\\.0\\.1:${port} .*\\(loopback only\\)`));
    } finally {
      server.close();
    }
    const list = await call(client, 'workspace_list', {});
    const mine = list.structuredContent.workspaces.filter((w) => w.name === wsName);
    assert.equal(mine.length, 1);
    assert.equal(mine[0].state, 'running');
  });

  await step(`${label}: workspace_stop, workspace_start and workspace_hibernate move the workspace`,
             async () => {
    const stopped = await call(client, 'workspace_stop', { workspace: wsName, force: true, wait: true });
    assert.equal(stopped.structuredContent?.state, 'stopped', text(stopped));
    assert.equal((await api('GET', `/v1/workspaces/${wsName}`)).state, 'stopped');
    const started = await call(client, 'workspace_start', { workspace: wsName });  // waits by default
    assert.equal(started.structuredContent?.state, 'running', text(started));
    assert.equal((await api('GET', `/v1/workspaces/${wsName}`)).state, 'running');
    // Starting what runs is no error (berthd takes it as done).
    const again = await call(client, 'workspace_start', { workspace: wsName });
    assert.equal(again.structuredContent?.state, 'running', text(again));
    const hibernated = await call(client, 'workspace_hibernate', { workspace: wsName, wait: true });
    assert.equal(hibernated.structuredContent?.state, 'hibernated', text(hibernated));
    assert.equal((await api('GET', `/v1/workspaces/${wsName}`)).state, 'hibernated');
    const resumed = await call(client, 'workspace_start', {});  // the session's default workspace
    assert.equal(resumed.structuredContent?.state, 'running', text(resumed));
    assert.equal(resumed.structuredContent?.name, wsName);
    const events = (await api('GET', `/v1/workspaces/${wsName}/events?limit=1000`)).events;
    assert.equal(events.filter((e) => e.type === 'hibernated').length, 1);
  });

  await step(`${label}: workspace_use changes the session's default workspace`, async () => {
    const other = `${wsName}-other`;
    const made = await api('POST', '/v1/workspaces', { name: other, env: { BERTH_WS_MARK: 'other' } });
    await api('POST', `/v1/workspaces/${made.id}/wait`, { state: 'running', timeout_s: 60 });
    const used = await call(client, 'workspace_use', { workspace: other });
    assert.equal(used.structuredContent?.name, other, text(used));
    assert.equal((await call(client, 'workspace_get', {})).structuredContent?.name, other);
    // exec without a workspace runs in the chosen one: only it has this variable.
    const there = await call(client, 'exec', { cmd: 'echo "mark=$BERTH_WS_MARK"' });
    assert.equal(there.structuredContent?.stdout, 'mark=other\n');
    await callFails(client, 'workspace_use', { workspace: 'no-such-workspace' }, /not_found|no workspace/);
    assert.equal((await call(client, 'workspace_get', {})).structuredContent?.name, other);
    await call(client, 'workspace_use', { workspace: wsName });
    assert.equal((await call(client, 'workspace_get', {})).structuredContent?.name, wsName);
    const back = await call(client, 'exec', { cmd: 'echo "mark=$BERTH_WS_MARK"' });
    assert.equal(back.structuredContent?.stdout, 'mark=\n');
    await api('DELETE', `/v1/workspaces/${made.id}`);
  });

  await step(`${label}: file_delete removes the file`, async () => {
    await call(client, 'file_delete', { path: file });
    assert.equal(fs.existsSync(file), false);
  });

  return wsName;
}

// Checkpoints through `berth mcp` (HttpBackend) against berthd's routes (berthd's own /mcp serves
// them too: tests/integration/berthd_checkpoints_test.cc).
async function checkpoints(client, label) {
  await step(`${label}: checkpoint_create fails on a hibernated workspace (the test driver), refuses memory of a stopped one, then `
             + 'checkpoints it stopped; checkpoint_list lists it; checkpoint_restore answers the undo checkpoint; '
             + 'checkpoint_diff from an unknown checkpoint is not_found; '
             + 'template_list lists none; workspace_create from an unknown template is not_found',
              async () => {
    const ws = `cp-${label}`;
    const made = await api('POST', '/v1/workspaces', { name: ws });
    await api('POST', `/v1/workspaces/${made.id}/wait`, { state: 'running', timeout_s: 60 });
    await call(client, 'workspace_hibernate', { workspace: ws, wait: true });
    // (A hibernated one's managed save is repointed at new disks: libvirt's test driver cannot.)
    await callFails(client, 'checkpoint_create', { workspace: ws }, /failed_precondition.*not supported/);
    await call(client, 'workspace_stop', { workspace: ws, force: true, wait: true });
    // memory=true reaches berthd, whose 409 says a stopped workspace has no memory to checkpoint.
    await callFails(client, 'checkpoint_create', { workspace: ws, memory: true }, /failed_precondition.*no memory/);
    const taken = await call(client, 'checkpoint_create', { workspace: ws, name: 'first' });
    const id = taken.structuredContent?.id;
    assert.match(id ?? '', /^cp_/, text(taken));
    assert.equal(taken.structuredContent.name, 'first');
    assert.equal(taken.structuredContent.memory, false);
    const listed = await call(client, 'checkpoint_list', { workspace: ws });
    assert.deepEqual(listed.structuredContent.checkpoints.map((c) => c.id), [id]);
    const restored = await call(client, 'checkpoint_restore', { workspace: ws, checkpoint: 'first' });
    const undo = restored.structuredContent?.undo;
    assert.equal(undo?.kind, 'before_restore', text(restored));
    assert.match(text(restored), new RegExp(`restore checkpoint ${undo.id}`));
    const after = (await api('GET', `/v1/workspaces/${made.id}/checkpoints`)).checkpoints;
    assert.deepEqual(after.map((c) => c.id), [undo.id, id]);
    await callFails(client, 'checkpoint_restore', { workspace: ws, checkpoint: 'cp_nope' }, /not_found/);
    // checkpoint_diff reaches berthd's route, which names an unknown checkpoint before it would
    // wake the workspace for the guest to compare (the comparison itself needs a VM).
    await callFails(client, 'checkpoint_diff', { workspace: ws, checkpoint: 'cp_nope' },
                    /not_found.*no checkpoint 'cp_nope'/);
    // Templates: none yet (one needs a checkpoint with memory, which the test driver cannot take);
    // workspace_create with an unknown one is berthd's 404.
    const templates = await call(client, 'template_list', {});
    assert.deepEqual(templates.structuredContent.templates, [], text(templates));
    assert.match(text(templates), /no templates/);
    await callFails(client, 'workspace_create', { name: `tpl-${label}`, template: 'nope' }, /not_found.*no template 'nope'/);
    await api('DELETE', `/v1/workspaces/${made.id}`);
  });
}

// ---- malformed JSON-RPC ----------------------------------------------------------------------

// Talks to a stdio server with raw lines, as a broken client would.
async function rawStdio(lines) {
  const child = spawn(args['stdio-bin'], stdioArgs(), { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stdin.end(lines.join('\n') + '\n');
  const code = await new Promise((resolve) => child.on('exit', resolve));
  return { code, responses: out.split('\n').filter(Boolean).map((l) => JSON.parse(l)) };
}

function stdioArgs() {
  const sub = args['stdio-subcommand'] ? [args['stdio-subcommand']] : [];
  return ['--url', url, '--api-key', key, ...sub];
}

// ---- the run -------------------------------------------------------------------------------

try {
  await step('berthd starts and writes its address and admin key', async () => {
    await waitFor('listen.addr and admin.key', () => {
      if (berthdExited) throw new Error(`berthd exited: ${JSON.stringify(berthdExited)}`);
      return readTrimmed(path.join(dataDir, 'listen.addr')) && readTrimmed(path.join(dataDir, 'admin.key'));
    });
    url = readTrimmed(path.join(dataDir, 'listen.addr'));
    const admin = readTrimmed(path.join(dataDir, 'admin.key'));
    const tenant = await api('POST', '/v1/tenants', { name: 'mcp-test' }, admin);
    key = (await api('POST', '/v1/keys', { tenant: tenant.id, scope: 'write', name: 'mcp' }, admin)).key;
    assert.ok(key);
  });
  if (!key) throw new Error('berthd did not come up');

  // -- stdio -----------------------------------------------------------------------------------
  const stdioClient = new sdk.Client({ name: 'berth-mcp-test', version: '1.0.0' });
  const stdioTransport = new sdk.StdioClientTransport({
    command: args['stdio-bin'], args: stdioArgs(), stderr: 'inherit',
  });
  let stdioUp = false;
  await step('stdio: the SDK connects (initialize, latest protocol revision)', async () => {
    await stdioClient.connect(stdioTransport);
    stdioUp = true;
  });
  if (stdioUp) {
    await scenario(stdioClient, 'stdio');
    await checkpoints(stdioClient, 'stdio');
    await stdioClient.close();
  }

  await step('stdio: malformed JSON-RPC gets JSON-RPC errors, and the server goes on', async () => {
    const { code, responses } = await rawStdio([
      'this is not json',
      '{"jsonrpc":"2.0","id":1,"method":"no/such/method"}',
      '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}',
      '{"id":3,"method":"ping"}',
      '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"exec","arguments":{"cmd":7,"workspace":"x"}}}',
      '{"jsonrpc":"2.0","id":5,"method":"ping"}',
    ]);
    assert.equal(code, 0);
    const byId = new Map(responses.map((r) => [r.id, r]));
    assert.equal(responses.find((r) => r.id === null)?.error?.code, -32700);
    assert.equal(byId.get(1)?.error?.code, -32601);
    assert.equal(byId.get(2)?.error?.code, -32602);
    assert.equal(byId.get(3)?.error?.code, -32600);
    assert.equal(byId.get(4)?.result?.isError, true);
    assert.deepEqual(byId.get(5)?.result, {});
  });

  // -- streamable HTTP -------------------------------------------------------------------------
  const probeMcp = (base) => fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json',
               Accept: 'application/json, text/event-stream' },
    body: '{not json',
  });
  const mcpUrl = `${url}/mcp`;
  const probe = await probeMcp(url);
  const probeBody = await probe.text();
  {
    await step('http: a body that is not JSON is a 400 with a JSON-RPC parse error', async () => {
      assert.equal(probe.status, 400, probeBody);
      assert.equal(JSON.parse(probeBody).error.code, -32700);
    });

    const httpTransport = new sdk.StreamableHTTPClientTransport(new URL(mcpUrl), {
      requestInit: { headers: { Authorization: `Bearer ${key}` } },
    });
    const httpClient = new sdk.Client({ name: 'berth-mcp-test', version: '1.0.0' });
    let httpUp = false;
    await step('http: the SDK connects and gets a session id', async () => {
      await httpClient.connect(httpTransport);
      assert.ok(httpTransport.sessionId, 'Mcp-Session-Id');
      httpUp = true;
    });
    if (httpUp) {
      const wsName = await scenario(httpClient, 'http');
      const sessionId = httpTransport.sessionId;
      const post = (body, headers = {}) => fetch(mcpUrl, {
        method: 'POST',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json',
                   Accept: 'application/json, text/event-stream', ...headers },
        body,
      });

      await step('http: malformed and unknown requests in a session get JSON-RPC errors', async () => {
        const unknown = await post('{"jsonrpc":"2.0","id":"u","method":"no/such/method"}',
                                   { 'Mcp-Session-Id': sessionId });
        assert.equal(unknown.status, 200);
        assert.equal((await unknown.json()).error.code, -32601);
        const invalid = await post('{"jsonrpc":"2.0","id":7,"method":3}', { 'Mcp-Session-Id': sessionId });
        assert.equal(invalid.status, 400);
        assert.equal((await invalid.json()).error.code, -32600);
        const noSession = await post('{"jsonrpc":"2.0","id":8,"method":"ping"}');
        assert.equal(noSession.status, 400);
        const otherSession = await post('{"jsonrpc":"2.0","id":9,"method":"ping"}',
                                        { 'Mcp-Session-Id': 'f'.repeat(32) });
        assert.equal(otherSession.status, 404);
        const notification = await post('{"jsonrpc":"2.0","method":"notifications/initialized"}',
                                         { 'Mcp-Session-Id': sessionId });
        assert.equal(notification.status, 202);
      });

      await step('http: GET offers no stream (405)', async () => {
        const get = await fetch(mcpUrl, {
          headers: { Authorization: `Bearer ${key}`, Accept: 'text/event-stream',
                     'Mcp-Session-Id': sessionId },
        });
        assert.equal(get.status, 405);
      });

      await step('http: workspace_delete removes the workspace', async () => {
        const result = await call(httpClient, 'workspace_delete', { workspace: wsName });
        assert.equal(result.structuredContent?.state, 'deleting', text(result));
        assert.match(text(result), /It is being deleted with its disks/);
        await callFails(httpClient, 'exec', { cmd: 'true' }, /workspace_use/);
      });

      await step('http: DELETE ends the session', async () => {
        await httpTransport.terminateSession();
        const after = await post('{"jsonrpc":"2.0","id":10,"method":"ping"}',
                                 { 'Mcp-Session-Id': sessionId });
        assert.equal(after.status, 404);
      });
      await httpClient.close();
    }

    await step('http: no key or a wrong key is refused', async () => {
      const init = JSON.stringify({
        jsonrpc: '2.0', id: 1, method: 'initialize',
        params: { protocolVersion: sdk.LATEST_PROTOCOL_VERSION, capabilities: {},
                  clientInfo: { name: 'x', version: '1' } },
      });
      const none = await fetch(mcpUrl, {
        method: 'POST', body: init,
        headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
      });
      assert.equal(none.status, 401);
      const wrong = await fetch(mcpUrl, {
        method: 'POST', body: init,
        headers: { Authorization: 'Bearer bk_wrong', 'Content-Type': 'application/json',
                   Accept: 'application/json, text/event-stream' },
      });
      assert.equal(wrong.status, 401);
    });
  }
} catch (e) {
  failed++;
  console.log(`FAIL ${e.stack || e}`);
} finally {
  await deleteWorkspaces();
  await stopBerthd();
  killLeftovers();
  if (failed > 0) {
    const tail = fs.readFileSync(logFile, 'utf8').slice(-8000);
    console.log(`--- berthd log (tail)\n${tail}`);
  }
  fs.rmSync(tmp, { recursive: true, force: true });
}

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
