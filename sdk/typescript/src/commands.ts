// ws.commands: run a command and wait (streamed through POST …/exec as NDJSON, so output
// arrives live and keepalives show the link is up), or start it in the background and get a
// handle to wait for, kill, feed, or find again later by pid or tag.

import { ApiClient, CallOptions, readNdjson, wsPath } from './client.js';
import { BerthError, CommandExitError, CommandResult, InvalidArgumentError, TimeoutError } from './errors.js';

export interface RunOptions extends CallOptions {
  /** Start it and return a CommandHandle at once. */
  background?: boolean;
  /** Called with each piece of stdout as it arrives. */
  onStdout?: (data: string) => void;
  /** Called with each piece of stderr as it arrives. */
  onStderr?: (data: string) => void;
  /** How long the command may run; the agent kills its process group after it (default
   * 60 000 ms for foreground commands, none for background ones; 0: no limit). */
  timeoutMs?: number;
  /** Working directory (default: the user's home). */
  cwd?: string;
  /** The user to run as (default: the agent's default user). */
  user?: string;
  /** Environment variables over the workspace's own. */
  envs?: Record<string, string>;
  /** Text written to its stdin, which is then closed. */
  stdin?: string;
  /** A name to find it by later (`commands.connect(tag)`); background processes only. */
  tag?: string;
  /** Throw CommandExitError on a non-zero exit (default true). */
  check?: boolean;
}

/** A process as the agent's table lists it. */
export interface ProcessInfo {
  pid: number;
  tag: string | null;
  cmd: string | string[];
  user: string;
  pty: boolean;
  status: 'running' | 'exited';
  exit_code: number | null;
  signal: string | null;
  started_at: string;
  ended_at: string | null;
  stdout_bytes: number;
  stderr_bytes: number;
}

export const kDefaultCommandTimeoutMs = 60_000;

function decodeData(event: Record<string, unknown>): string {
  if (typeof event.data === 'string') return event.data;
  if (typeof event.data_b64 === 'string') return Buffer.from(event.data_b64, 'base64').toString('utf8');
  return '';
}

// How long the rest of an exec stream is read after its `end` event (see drain()).
const kDrainMs = 1_000;

// berthd ends an exec stream right after `end` (the chunked body's last bytes). Reading them
// lets fetch put the keep-alive connection back in its pool; returning at `end` cancels the
// body, which closes the connection, and the next call pays for a new one (measured: ~3 ms
// of an 8 ms exec). Bounded: a stream still open after kDrainMs is cut through `stop`.
async function drain(it: AsyncIterator<unknown>, stop: AbortController): Promise<void> {
  const timer = setTimeout(() => stop.abort(new Error('drained')), kDrainMs);
  try {
    while (!(await it.next()).done) { /* nothing follows `end` */ }
  } catch {
    // Cut, or broken after the end: the result stands.
  } finally {
    clearTimeout(timer);
  }
}

// Reads exec or process-output events until `end`; fills in the result and calls back. With
// `stop` (the signal of the stream under `events`), the rest of the stream is drained after
// `end` so that its connection is kept.
async function consume(events: AsyncIterable<Record<string, unknown>>, out: CommandResult,
                       onStdout?: (d: string) => void, onStderr?: (d: string) => void,
                       onStart?: (e: Record<string, unknown>) => void,
                       stop?: AbortController): Promise<boolean> {
  const it = events[Symbol.asyncIterator]();
  try {
    for (;;) {
      const next = await it.next();
      if (next.done) return false;
      const event = next.value;
      switch (event.type) {
        case 'start':
        case 'attached':
          onStart?.(event);
          break;
        case 'stdout': {
          const d = decodeData(event);
          out.stdout += d;
          onStdout?.(d);
          break;
        }
        case 'stderr': {
          const d = decodeData(event);
          out.stderr += d;
          onStderr?.(d);
          break;
        }
        case 'end':
          out.exitCode = typeof event.exit_code === 'number' ? event.exit_code : -1;
          out.signal = typeof event.signal === 'string' ? event.signal : null;
          out.timedOut = event.timed_out === true;
          if (out.exitCode !== 0) {
            out.error = out.timedOut ? 'timed out (timeoutMs) and was killed'
                      : out.signal ? `was killed by SIG${out.signal}` : `exited with code ${out.exitCode}`;
          }
          if (stop) await drain(it, stop);
          return true;
        case 'error': {
          const e = (event.error ?? {}) as { code?: string; message?: string };
          throw new BerthError(`the command's stream failed: ${e.message ?? 'unknown error'}`,
                               { code: e.code ?? 'internal' });
        }
        default:
          break;  // keepalive
      }
    }
  } finally {
    await it.return?.(undefined);
  }
}

function finish(result: CommandResult, check: boolean | undefined): CommandResult {
  if (check !== false && result.exitCode !== 0) throw new CommandExitError(result);
  return result;
}

/** A process started with `background: true` or found with `commands.connect()`. */
export class CommandHandle {
  stdout = '';
  stderr = '';

  constructor(private readonly client: ApiClient, private readonly ws: string,
              readonly pid: number, readonly tag: string | null,
              private readonly callbacks: Pick<RunOptions, 'onStdout' | 'onStderr'> = {}) {}

  /** Waits for it to end (its whole output, replayed from the start, reaches the callbacks);
   * throws CommandExitError on a non-zero exit unless `check: false`. No deadline by
   * default: a process may run for days; pass `requestTimeoutMs` or a signal to bound it. */
  async wait(options: CallOptions & { check?: boolean } = {}): Promise<CommandResult> {
    const result: CommandResult = { exitCode: -1, stdout: '', stderr: '', signal: null, timedOut: false };
    const timeout = options.requestTimeoutMs ?? 2 ** 31 - 1;
    const { response, deadline } = await this.client.request({
      method: 'GET', path: wsPath(this.ws, `/processes/${this.pid}/output`), query: { follow: 1 },
      streamResponse: true, requestTimeoutMs: Math.min(timeout, this.client.requestTimeoutMs),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    deadline.done();
    const whole = AbortSignal.timeout(timeout);
    const joined = options.signal ? anySignal([options.signal, whole]) : { signal: whole, dispose: () => {} };
    const signal = joined.signal;
    try {
      const ended = await consume(readNdjson(response, this.client.streamIdleTimeoutMs, signal,
                                             `process ${this.pid}'s output`),
                                  result, this.callbacks.onStdout, this.callbacks.onStderr);
      if (!ended) {
        throw new BerthError(`process ${this.pid}'s output ended without its exit status`,
                             { code: 'unavailable', retryable: true });
      }
    } catch (e) {
      if (whole.aborted && !options.signal?.aborted) {
        throw new TimeoutError(`process ${this.pid} still runs after ${timeout} ms (requestTimeoutMs)`,
                               { code: 'deadline_exceeded', retryable: true });
      }
      throw e;
    } finally {
      joined.dispose();
    }
    this.stdout = result.stdout;
    this.stderr = result.stderr;
    return finish(result, options.check);
  }

  /** Kills its process group (SIGKILL); false when it had already ended. */
  async kill(options: CallOptions = {}): Promise<boolean> {
    const info = await this.client.json<ProcessInfo>({
      method: 'DELETE', path: wsPath(this.ws, `/processes/${this.pid}`), ...options,
    });
    return info.signal === 'KILL';
  }

  /** Writes to its stdin (`close: true` closes it after). */
  async sendStdin(data: string | Uint8Array, options: CallOptions & { close?: boolean } = {}): Promise<void> {
    const { close, ...call } = options;
    const { response } = await this.client.request({
      method: 'POST', path: wsPath(this.ws, `/processes/${this.pid}/stdin`),
      query: close ? { close: 1 } : undefined,
      stream: new Blob([data as BlobPart]).stream(), ...call,
    });
    await response.body?.cancel();
  }

  /** Its current entry in the process table. */
  info(options: CallOptions = {}): Promise<ProcessInfo> {
    return this.client.json<ProcessInfo>({
      method: 'GET', path: wsPath(this.ws, `/processes/${this.pid}`), ...options,
    });
  }
}

// One signal that aborts when any of `signals` does; dispose() removes the listeners.
function anySignal(signals: AbortSignal[]): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const listeners: Array<[AbortSignal, () => void]> = [];
  for (const s of signals) {
    if (s.aborted) {
      controller.abort(s.reason);
      break;
    }
    const onAbort = () => controller.abort(s.reason);
    s.addEventListener('abort', onAbort, { once: true });
    listeners.push([s, onAbort]);
  }
  return {
    signal: controller.signal,
    dispose: () => { for (const [s, l] of listeners) s.removeEventListener('abort', l); },
  };
}

export class Commands {
  constructor(private readonly client: ApiClient, private readonly ws: string) {}

  /** Runs `cmd` (a `/bin/sh -c` string, or an argv array). */
  run(cmd: string | string[], options: RunOptions & { background: true }): Promise<CommandHandle>;
  run(cmd: string | string[], options?: RunOptions & { background?: false }): Promise<CommandResult>;
  run(cmd: string | string[], options?: RunOptions): Promise<CommandResult | CommandHandle>;
  async run(cmd: string | string[], options: RunOptions = {}): Promise<CommandResult | CommandHandle> {
    if ((typeof cmd === 'string' && cmd === '') || (Array.isArray(cmd) && cmd.length === 0)) {
      throw new InvalidArgumentError('cmd is empty', { code: 'invalid_argument' });
    }
    const body: Record<string, unknown> = { cmd };
    if (options.cwd !== undefined) body.cwd = options.cwd;
    if (options.user !== undefined) body.user = options.user;
    if (options.envs !== undefined) body.env = options.envs;
    if (options.stdin !== undefined) body.stdin = options.stdin;
    if (options.tag !== undefined) body.tag = options.tag;
    const timeoutMs = options.timeoutMs ?? (options.background ? 0 : kDefaultCommandTimeoutMs);
    if (timeoutMs > 0) body.timeout_ms = timeoutMs;
    const call: CallOptions = {};
    if (options.requestTimeoutMs !== undefined) call.requestTimeoutMs = options.requestTimeoutMs;
    if (options.signal !== undefined) call.signal = options.signal;

    if (options.background) {
      body.background = true;
      const started = await this.client.json<{ pid: number; tag: string | null }>({
        method: 'POST', path: wsPath(this.ws, '/exec'), json: body, ...call,
      });
      return new CommandHandle(this.client, this.ws, started.pid, started.tag ?? null, options);
    }

    // Streamed: the answer begins at once; after it, the stream's idle limit and the
    // command's own timeout bound the wait (the agent ends the stream when it kills it).
    const { response, deadline } = await this.client.request({
      method: 'POST', path: wsPath(this.ws, '/exec'), json: body,
      headers: { Accept: 'application/x-ndjson' }, streamResponse: true, ...call,
    });
    deadline.done();
    const result: CommandResult = { exitCode: -1, stdout: '', stderr: '', signal: null, timedOut: false };
    let pid = 0;
    const stop = new AbortController();
    const signals = anySignal(options.signal ? [stop.signal, options.signal] : [stop.signal]);
    let ended: boolean;
    try {
      ended = await consume(readNdjson(response, this.client.streamIdleTimeoutMs, signals.signal, 'exec'),
                            result, options.onStdout, options.onStderr,
                            (e) => { pid = typeof e.pid === 'number' ? e.pid : 0; }, stop);
    } finally {
      signals.dispose();
    }
    if (!ended) {
      throw new BerthError(`the exec stream of process ${pid} ended without its exit status ` +
                           `(the workspace stopped or the link dropped)`, { code: 'unavailable', retryable: true });
    }
    return finish(result, options.check);
  }

  /** The processes started through the API, running or recently ended. */
  async list(options: CallOptions = {}): Promise<ProcessInfo[]> {
    const answer = await this.client.json<{ processes: ProcessInfo[] }>({
      method: 'GET', path: wsPath(this.ws, '/processes'), ...options,
    });
    return answer.processes;
  }

  /** A handle on a process by pid or tag (404: NotFoundError). */
  async connect(pidOrTag: number | string,
                options: CallOptions & Pick<RunOptions, 'onStdout' | 'onStderr'> = {}): Promise<CommandHandle> {
    const { onStdout, onStderr, ...call } = options;
    const info = await this.client.json<ProcessInfo>({
      method: 'GET', path: wsPath(this.ws, `/processes/${encodeURIComponent(String(pidOrTag))}`), ...call,
    });
    const callbacks: Pick<RunOptions, 'onStdout' | 'onStderr'> = {};
    if (onStdout) callbacks.onStdout = onStdout;
    if (onStderr) callbacks.onStderr = onStderr;
    return new CommandHandle(this.client, this.ws, info.pid, info.tag, callbacks);
  }

  /** Kills a process by pid or tag; false when it had already ended. */
  async kill(pidOrTag: number | string, options: CallOptions = {}): Promise<boolean> {
    const info = await this.client.json<ProcessInfo>({
      method: 'DELETE', path: wsPath(this.ws, `/processes/${encodeURIComponent(String(pidOrTag))}`), ...options,
    });
    return info.signal === 'KILL';
  }
}
