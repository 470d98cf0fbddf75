// ws.pty: interactive terminals through GET …/exec/ws (README, "The agent API"): a JSON start
// frame with `pty: {cols, rows}` (or ?attach=PID_OR_TAG), binary frames with a one-byte
// channel (0 stdin, 1 output), JSON `resize`, and an `end` event. The agent sends nothing on
// a quiet terminal, so the client pings it: a link that answers nothing for the stream idle
// limit is dead, and a WebSocket that breaks (the workspace stopped) ends the terminal's
// wait() with UnavailableError at once.

import WebSocket from 'ws';
import { ApiClient, CallOptions, parseRetryAfter, wsPath } from './client.js';
import {
  BerthError, CommandExitError, CommandResult, InvalidArgumentError, TimeoutError,
  UnavailableError, errorFrom,
} from './errors.js';

/** A quiet terminal gets a ping this often. */
const kPingIntervalMs = 15_000;
const kMaxSide = 10_000;

export interface PtyCreateOptions extends CallOptions {
  /** Columns (default 80). */
  cols?: number;
  /** Rows (default 24). */
  rows?: number;
  /** Called with each piece of the terminal's output, as bytes, as it arrives. */
  onData?: (data: Uint8Array) => void | Promise<void>;
  /** What to run (a `/bin/sh -c` string or an argv array); default the user's login shell. */
  cmd?: string | string[];
  cwd?: string;
  user?: string;
  envs?: Record<string, string>;
  /** A name to find it by later (`pty.connect(tag)`). */
  tag?: string;
}

export interface PtyConnectOptions extends CallOptions {
  onData?: (data: Uint8Array) => void | Promise<void>;
}

function checkSize(cols: number, rows: number): void {
  if (!Number.isInteger(cols) || !Number.isInteger(rows) || cols < 1 || rows < 1 ||
      cols > kMaxSide || rows > kMaxSide) {
    throw new InvalidArgumentError(`a terminal is 1-${kMaxSide} columns and rows, not ${cols}x${rows}`,
                                   { code: 'invalid_argument' });
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A terminal started by pty.create() or found by pty.connect(). */
export class PtyHandle {
  readonly pid: number;
  readonly tag: string | null;
  private readonly done: Promise<CommandResult>;
  private finished = false;
  private disconnected = false;
  private chain: Promise<void> = Promise.resolve();

  /** @internal */
  constructor(private readonly client: ApiClient, private readonly ws: string,
              private readonly socket: WebSocket, first: Record<string, unknown>,
              onData?: (data: Uint8Array) => void | Promise<void>,
              early: EarlyEvents = { messages: [], closed: undefined }) {
    this.pid = typeof first.pid === 'number' ? first.pid : 0;
    this.tag = typeof first.tag === 'string' ? first.tag : null;
    const what = `terminal ${this.pid} in ${ws}`;
    this.done = new Promise<CommandResult>((resolve, reject) => {
      let last = Date.now();
      const idleMs = client.streamIdleTimeoutMs;
      const ping = setInterval(() => {
        if (Date.now() - last > idleMs) {
          fail(new TimeoutError(`${what}: no answer to pings for ${idleMs} ms: berthd or the workspace is gone`,
                                { code: 'deadline_exceeded', retryable: true }));
          socket.terminate();
          return;
        }
        if (Date.now() - last >= kPingIntervalMs) socket.ping();
      }, Math.min(kPingIntervalMs, 5_000));
      const fail = (e: unknown) => {
        clearInterval(ping);
        this.finished = true;
        reject(e);
      };
      socket.on('pong', () => { last = Date.now(); });
      const onMessage = (data: Buffer, isBinary: boolean) => {
        last = Date.now();
        if (isBinary) {
          if (data.length > 1 && (data[0] === 1 || data[0] === 2) && onData) {
            const piece = new Uint8Array(data.subarray(1));
            this.chain = this.chain.then(() => onData(piece)).catch((e: unknown) => {
              fail(e);
              socket.terminate();
            });
          }
          return;
        }
        let event: Record<string, unknown>;
        try {
          event = JSON.parse(data.toString('utf8')) as Record<string, unknown>;
        } catch {
          return;
        }
        if (event.type === 'end') {
          const result: CommandResult = {
            exitCode: typeof event.exit_code === 'number' ? event.exit_code : -1,
            stdout: '', stderr: '',
            signal: typeof event.signal === 'string' ? event.signal : null,
            timedOut: event.timed_out === true,
          };
          clearInterval(ping);
          this.finished = true;
          // What onData still has to do comes first.
          this.chain.then(() => resolve(result), reject);
          socket.close(1000);
        }
        // {"type":"error"} answers a control message the agent could not apply (a resize of a
        // process that just ended): the end comes anyway.
      };
      const onClose = (code: number) => {
        if (this.finished) return;
        if (this.disconnected) {
          fail(new BerthError(`${what}: disconnected; the process runs on (reattach with pty.connect(${this.pid}))`,
                              { code: 'cancelled' }));
        } else {
          fail(new UnavailableError(`${what}: the stream broke before the process ended ` +
                                    `(did the workspace stop?) (WebSocket close ${code})`,
                                    { code: 'unavailable', retryable: true }));
        }
      };
      // What came between `started` and now (the same TCP read can carry both) goes first.
      socket.removeAllListeners('message');
      socket.removeAllListeners('close');
      socket.on('message', onMessage);
      socket.on('close', onClose);
      socket.on('error', () => { /* 'close' follows and says what happened */ });
      for (const [data, isBinary] of early.messages) onMessage(data, isBinary);
      if (early.closed !== undefined) onClose(early.closed);
    });
    // Nobody may be waiting yet: the end (or the break) is kept for wait(), never unhandled.
    this.done.catch(() => {});
  }

  /** Whether the terminal still runs as far as this handle knows. */
  get running(): boolean { return !this.finished; }

  /** Types into the terminal (`"ls\n"`; `"\x03"` is Ctrl-C, `"\x04"` Ctrl-D). */
  async sendInput(data: string | Uint8Array): Promise<void> {
    const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
    if (bytes.length === 0) return;
    const frame = new Uint8Array(bytes.length + 1);
    frame[0] = 0;
    frame.set(bytes, 1);
    await this.send(frame, true);
  }

  /** Changes the terminal's size (the process gets SIGWINCH). */
  async resize(size: { cols: number; rows: number }): Promise<void> {
    checkSize(size.cols, size.rows);
    await this.send(JSON.stringify({ type: 'resize', cols: size.cols, rows: size.rows }), false);
  }

  private send(data: Uint8Array | string, binary: boolean): Promise<void> {
    if (this.socket.readyState !== WebSocket.OPEN) {
      return Promise.reject(new UnavailableError(`terminal ${this.pid}: the connection is closed`,
                                                 { code: 'unavailable', retryable: false }));
    }
    return new Promise((resolve, reject) => {
      this.socket.send(data, { binary }, (e) => {
        if (e) reject(new UnavailableError(`terminal ${this.pid}: ${e.message}`, { code: 'unavailable', retryable: true }));
        else resolve();
      });
    });
  }

  /** Waits for the process to end: its exit code (the output went to onData). Throws
   * CommandExitError on a non-zero exit unless `check: false`, UnavailableError within
   * seconds if the workspace stops; no deadline unless `requestTimeoutMs` (the terminal runs
   * on after it). */
  async wait(options: CallOptions & { check?: boolean } = {}): Promise<CommandResult> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const racers: Array<Promise<CommandResult>> = [this.done];
    if (options.requestTimeoutMs !== undefined) {
      const ms = options.requestTimeoutMs;
      racers.push(new Promise((_, reject) => {
        timer = setTimeout(() => reject(new TimeoutError(
          `terminal ${this.pid} still runs after ${ms} ms (requestTimeoutMs)`,
          { code: 'deadline_exceeded', retryable: true })), ms);
      }));
    }
    if (options.signal) {
      const signal = options.signal;
      racers.push(new Promise((_, reject) => {
        if (signal.aborted) reject(signal.reason);
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      }));
    }
    try {
      const result = await Promise.race(racers);
      if (options.check !== false && result.exitCode !== 0) {
        result.error = result.signal ? `was killed by SIG${result.signal}` : `exited with code ${result.exitCode}`;
        throw new CommandExitError(result);
      }
      return result;
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGKILL to its process group; false when it had already ended. */
  async kill(options: CallOptions = {}): Promise<boolean> {
    return killProcess(this.client, this.ws, this.pid, options);
  }

  /** Closes this client's connection; the process runs on (pty.connect(pid) reattaches and
   * replays its output). wait() then rejects. */
  disconnect(): void {
    this.disconnected = true;
    this.socket.close(1000);
  }
}

async function killProcess(client: ApiClient, ws: string, pidOrTag: number | string,
                           options: CallOptions): Promise<boolean> {
  const info = await client.json<{ signal?: string | null }>({
    method: 'DELETE', path: wsPath(ws, `/processes/${encodeURIComponent(String(pidOrTag))}`), ...options,
  });
  return info.signal === 'KILL';
}

export class Pty {
  constructor(private readonly client: ApiClient, private readonly ws: string) {}

  /** Starts `cmd` (default: the user's login shell) on a terminal of cols x rows and resolves
   * once it runs. It runs until it exits or is killed (no timeoutMs). */
  async create(options: PtyCreateOptions = {}): Promise<PtyHandle> {
    const cols = options.cols ?? 80;
    const rows = options.rows ?? 24;
    checkSize(cols, rows);
    const start: Record<string, unknown> = { type: 'start', pty: { cols, rows } };
    if (options.cmd !== undefined) start.cmd = options.cmd;
    if (options.cwd !== undefined) start.cwd = options.cwd;
    if (options.user !== undefined) start.user = options.user;
    if (options.envs !== undefined) start.env = options.envs;
    if (options.tag !== undefined) start.tag = options.tag;
    return this.open(start, undefined, options, options.onData);
  }

  /** Reattaches to a running terminal by pid or tag: what it printed so far (the agent's
   * buffer) reaches onData first, then live output. NotFoundError if there is none. */
  async connect(pidOrTag: number | string, options: PtyConnectOptions = {}): Promise<PtyHandle> {
    return this.open(undefined, String(pidOrTag), options, options.onData);
  }

  /** SIGKILL to a terminal's process group by pid or tag; false when it had already ended. */
  kill(pidOrTag: number | string, options: CallOptions = {}): Promise<boolean> {
    return killProcess(this.client, this.ws, pidOrTag, options);
  }

  private async open(start: Record<string, unknown> | undefined, attach: string | undefined,
                     options: CallOptions, onData?: (data: Uint8Array) => void | Promise<void>): Promise<PtyHandle> {
    const what = attach ? `terminal ${attach} in ${this.ws}` : `terminal in ${this.ws}`;
    const timeoutMs = options.requestTimeoutMs ?? this.client.requestTimeoutMs;
    const until = Date.now() + timeoutMs;
    const url = this.client.url(wsPath(this.ws, '/exec/ws'), attach ? { attach } : undefined)
      .replace(/^http/, 'ws');
    for (;;) {
      const outcome = await this.tryOpen(url, start, what, Math.max(1, until - Date.now()), options.signal);
      if (outcome instanceof PtyOpened) {
        return new PtyHandle(this.client, this.ws, outcome.socket, outcome.first, onData, outcome.early);
      }
      // A 503 or 429 with Retry-After: berthd did nothing (a workspace waking); ask again.
      const wait = Math.min(Math.max(outcome.retryAfterMs, 100), 5_000);
      if (Date.now() + wait + 100 > until) throw outcome.error;
      await sleep(wait);
    }
  }

  private tryOpen(url: string, start: Record<string, unknown> | undefined, what: string, timeoutMs: number,
                  signal?: AbortSignal): Promise<PtyOpened | Retry> {
    return new Promise((resolve, reject) => {
      const headers: Record<string, string> = { 'User-Agent': 'berth-sdk-typescript/0.1' };
      if (this.client.apiKey) headers.Authorization = `Bearer ${this.client.apiKey}`;
      const socket = new WebSocket(url, { headers, handshakeTimeout: timeoutMs, perMessageDeflate: false });
      let settled = false;
      const timer = setTimeout(() => finish(new TimeoutError(`${what}: no answer within ${timeoutMs} ms (requestTimeoutMs)`,
                                                             { code: 'deadline_exceeded', retryable: true })), timeoutMs);
      const onAbort = () => finish(signal?.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      const finish = (e: unknown, value?: PtyOpened | Retry) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        if (value) {
          resolve(value);
        } else {
          socket.removeAllListeners('message');
          socket.terminate();
          reject(e);
        }
      };
      socket.on('unexpected-response', (_req, res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => { if (chunks.length < 64) chunks.push(c); });
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown;
          try { parsed = JSON.parse(text); } catch { parsed = undefined; }
          const status = res.statusCode ?? 0;
          const error = errorFrom(status, parsed, `GET ${url}: HTTP ${status} ${text.slice(0, 200)}`);
          const after = parseRetryAfter(res.headers['retry-after'] as string | undefined ?? null);
          if ((status === 503 || status === 429) && after !== undefined) {
            finish(undefined, new Retry(after, error));
          } else {
            finish(error);
          }
        });
      });
      socket.on('error', (e: Error) => finish(new UnavailableError(`${what}: ${e.message}`,
                                                                    { code: 'unavailable', retryable: true, cause: e })));
      socket.on('close', (code: number, reason: Buffer) => finish(new UnavailableError(
        `${what}: closed before it started (${code} ${reason.toString('utf8')})`, { code: 'unavailable', retryable: true })));
      socket.on('open', () => {
        if (start) socket.send(JSON.stringify(start));
      });
      const early: EarlyEvents = { messages: [], closed: undefined };
      socket.on('message', (data: Buffer, isBinary: boolean) => {
        if (settled) {
          early.messages.push([data, isBinary]);
          return;
        }
        if (isBinary) return;
        let event: Record<string, unknown>;
        try {
          event = JSON.parse(data.toString('utf8')) as Record<string, unknown>;
        } catch {
          finish(new BerthError(`${what}: the agent's answer is not JSON`, { code: 'internal' }));
          return;
        }
        if (event.type === 'error') {
          finish(errorFrom(0, event, `${what}: refused`));
        } else if (event.type === 'started' || event.type === 'attached') {
          socket.removeAllListeners('close');
          socket.removeAllListeners('error');
          socket.removeAllListeners('unexpected-response');
          socket.on('close', (code: number) => { early.closed = code; });
          socket.on('error', () => {});
          finish(undefined, new PtyOpened(socket, event, early));
        }
      });
    });
  }
}

interface EarlyEvents {
  messages: Array<[Buffer, boolean]>;
  closed: number | undefined;
}

class PtyOpened {
  constructor(readonly socket: WebSocket, readonly first: Record<string, unknown>,
              readonly early: EarlyEvents) {}
}

class Retry {
  constructor(readonly retryAfterMs: number, readonly error: BerthError) {}
}
