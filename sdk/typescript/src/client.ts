// The transport: configuration, one HTTP exchange with a deadline, berthd's Retry-After rule,
// typed errors, and response bodies read as streams with an idle limit. Every other file calls
// berthd through ApiClient.request().
//
// The deadline and retry rules mirror common/client/api_client.cc: the whole call (connect,
// waits, retries, the answer's header) ends by its deadline; a 503 (or 429) with
// `Retry-After: N` means berthd did not act on the request (a workspace waking, a connection
// cap), so a request whose body can be sent again is sent again after N seconds (in steps of
// at most 5 s), while the deadline leaves room for the wait and 100 ms more. A request that
// failed without an answer (refused, reset) is sent again only when it is idempotent (GET,
// HEAD, PUT, DELETE) or carries an Idempotency-Key.

import { randomBytes } from 'node:crypto';
import { BerthError, TimeoutError, UnavailableError, errorFrom } from './errors.js';

/** Options every entry point takes. */
export interface ConnectionOptions {
  /** berthd's address, e.g. `http://127.0.0.1:8420`. Default: `$BERTH_URL`, else that. */
  apiUrl?: string;
  /** The API key (`bk_…`). Default: `$BERTH_API_KEY`. */
  apiKey?: string;
  /** How long the client waits for each call (default 60 000 ms; see README, "Time limits"). */
  requestTimeoutMs?: number;
  /** A stream (exec output, a download) with no bytes for this long fails (default 60 000 ms;
   * berthd's streams send a keepalive every 15 s). */
  streamIdleTimeoutMs?: number;
  /** The preview domain for getHost() (default `$BERTH_PREVIEW_DOMAIN`, else `preview.localhost`). */
  previewDomain?: string;
}

/** Options of one call. */
export interface CallOptions {
  /** How long the client waits for this call (default: the connection's requestTimeoutMs). */
  requestTimeoutMs?: number;
  /** Cancels the call; the promise rejects with the signal's reason. */
  signal?: AbortSignal;
}

export const kDefaultRequestTimeoutMs = 60_000;
export const kDefaultStreamIdleTimeoutMs = 60_000;
const kMaxRetryStepMs = 5_000;  // berthd says 1-5 s; a longer answer is waited out in steps
const kMinRetryStepMs = 100;

export interface RequestInit2 extends CallOptions {
  method: string;
  path: string;
  query?: Record<string, string | number | boolean | undefined>;
  /** A JSON body (sent again on a retry). */
  json?: unknown;
  /** A body that can be sent once (a stream). Never retried. */
  stream?: ReadableStream<Uint8Array>;
  headers?: Record<string, string>;
  /** Sends an Idempotency-Key (fresh per call), which makes a retry after a lost answer safe. */
  idempotencyKey?: boolean;
  /** The call's deadline covers only the answer's header: the body is read by the caller. */
  streamResponse?: boolean;
}

function env(name: string): string | undefined {
  const v = typeof process !== 'undefined' ? process.env[name] : undefined;
  return v === undefined || v === '' ? undefined : v;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** Retry-After as delta seconds; undefined for an HTTP date or anything else. */
export function parseRetryAfter(value: string | null): number | undefined {
  if (value === null) return undefined;
  const v = value.trim();
  if (!/^[0-9]{1,6}$/.test(v)) return undefined;
  return Number(v) * 1000;
}

/** A deadline for one call, joined with the caller's signal: `signal` aborts at either. */
export class Deadline {
  readonly signal: AbortSignal;
  readonly at: number;
  private readonly controller = new AbortController();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly outer: AbortSignal | undefined;
  private readonly onOuter = () => this.controller.abort(this.outer?.reason);

  constructor(ms: number, outer?: AbortSignal) {
    this.at = Date.now() + ms;
    this.signal = this.controller.signal;
    this.outer = outer;
    if (outer?.aborted) {
      this.controller.abort(outer.reason);
    } else {
      outer?.addEventListener('abort', this.onOuter, { once: true });
      this.timer = setTimeout(() => this.expire(ms), ms);
    }
  }

  private expire(ms: number): void {
    this.controller.abort(new TimeoutError(`no answer within ${ms} ms (requestTimeoutMs)`,
                                           { code: 'deadline_exceeded', retryable: true }));
  }

  remaining(): number { return Math.max(0, this.at - Date.now()); }
  /** Whether the caller cancelled (rather than the deadline passing). */
  cancelledByCaller(): boolean { return this.outer?.aborted ?? false; }

  /** Frees the timer and the listener; the signal stays as it is. */
  done(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.outer?.removeEventListener('abort', this.onOuter);
  }
}

/** Wraps whatever fetch or a stream threw: the caller's abort reason as it is, a deadline as
 * TimeoutError, a BerthError as it is, anything else (a TypeError from fetch) as
 * UnavailableError with the cause kept. */
export function wrapError(e: unknown, deadline: Deadline | undefined, what: string): unknown {
  if (deadline?.cancelledByCaller()) return deadline.signal.reason;
  if (deadline?.signal.aborted && deadline.signal.reason instanceof BerthError) {
    return deadline.signal.reason;
  }
  if (e instanceof BerthError) return e;
  const cause = (e as { cause?: { code?: string; message?: string } })?.cause;
  const detail = cause?.code ?? cause?.message ?? (e instanceof Error ? e.message : String(e));
  return new UnavailableError(`${what}: ${detail}`, { code: 'unavailable', retryable: true, cause: e });
}

export class ApiClient {
  readonly apiUrl: string;
  readonly apiKey: string;
  readonly requestTimeoutMs: number;
  readonly streamIdleTimeoutMs: number;
  readonly previewDomain: string;

  constructor(options: ConnectionOptions = {}) {
    this.apiUrl = (options.apiUrl ?? env('BERTH_URL') ?? 'http://127.0.0.1:8420').replace(/\/+$/, '');
    this.apiKey = options.apiKey ?? env('BERTH_API_KEY') ?? '';
    this.requestTimeoutMs = options.requestTimeoutMs ?? kDefaultRequestTimeoutMs;
    this.streamIdleTimeoutMs = options.streamIdleTimeoutMs ?? kDefaultStreamIdleTimeoutMs;
    this.previewDomain = options.previewDomain ?? env('BERTH_PREVIEW_DOMAIN') ?? 'preview.localhost';
  }

  url(path: string, query?: RequestInit2['query']): string {
    let url = this.apiUrl + path;
    if (query) {
      const params = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) {
        if (v !== undefined) params.set(k, String(v));
      }
      const text = params.toString();
      if (text) url += (url.includes('?') ? '&' : '?') + text;
    }
    return url;
  }

  /**
   * One call: retried as the file comment says, the answer's status checked (a non-2xx
   * becomes its typed error). With `streamResponse` the Response is returned with its body
   * unread and `deadline` still running for the caller to read it under (then call done()).
   */
  async request(init: RequestInit2): Promise<{ response: Response; deadline: Deadline }> {
    const deadline = new Deadline(init.requestTimeoutMs ?? this.requestTimeoutMs, init.signal);
    const headers: Record<string, string> = { 'User-Agent': 'berth-sdk-typescript/0.1', ...init.headers };
    if (this.apiKey) headers.Authorization = `Bearer ${this.apiKey}`;
    let body: string | ReadableStream<Uint8Array> | undefined;
    if (init.json !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(init.json);
    } else if (init.stream) {
      body = init.stream;
    }
    if (init.idempotencyKey) headers['Idempotency-Key'] = randomBytes(16).toString('hex');
    const replayable = init.stream === undefined;
    const idempotent = ['GET', 'HEAD', 'PUT', 'DELETE'].includes(init.method) || !!init.idempotencyKey;
    const url = this.url(init.path, init.query);
    let lostAnswers = 0;
    try {
      for (;;) {
        let response: Response;
        try {
          // redirect 'error' for a streamed body: with any other mode undici clones the
          // request for a possible redirect, teeing the body, and the unread branch of the
          // tee would hold the whole upload in memory. berthd's API never redirects.
          const fetchInit: RequestInit & { duplex?: string } = {
            method: init.method, headers, signal: deadline.signal,
            redirect: init.stream ? 'error' : 'manual',
          };
          if (body !== undefined) fetchInit.body = body;
          if (init.stream) fetchInit.duplex = 'half';
          response = await fetch(url, fetchInit);
        } catch (e) {
          const wrapped = wrapError(e, deadline, `${init.method} ${init.path}`);
          // No answer: berthd may or may not have acted. Only a call that is safe to repeat
          // goes again, with a growing pause, while the deadline lasts.
          if (wrapped instanceof UnavailableError && replayable && idempotent) {
            const pause = Math.min(kMaxRetryStepMs, 200 * 2 ** lostAnswers++);
            if (deadline.remaining() > pause + kMinRetryStepMs) {
              await sleep(pause, deadline.signal);
              continue;
            }
          }
          throw wrapped;
        }
        if (response.ok || (response.status >= 100 && response.status < 400)) {
          if (!init.streamResponse) return { response, deadline };
          return { response, deadline };
        }
        const retryAfter = parseRetryAfter(response.headers.get('retry-after'));
        if ((response.status === 503 || response.status === 429) && retryAfter !== undefined &&
            replayable) {
          const wait = Math.min(Math.max(retryAfter, kMinRetryStepMs), kMaxRetryStepMs);
          if (deadline.remaining() > wait + kMinRetryStepMs) {
            await response.body?.cancel().catch(() => {});
            await sleep(wait, deadline.signal);
            continue;
          }
        }
        const text = await response.text().catch(() => '');
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = undefined;
        }
        throw errorFrom(response.status, parsed,
                        `${init.method} ${init.path}: HTTP ${response.status} ${text.slice(0, 200)}`);
      }
    } catch (e) {
      deadline.done();
      throw wrapError(e, deadline, `${init.method} ${init.path}`);
    } finally {
      if (!init.streamResponse) deadline.done();
    }
  }

  /** A call with a JSON answer ({} for an empty body), read whole within the deadline. */
  async json<T>(init: RequestInit2): Promise<T> {
    const { response, deadline } = await this.request({ ...init, streamResponse: true });
    try {
      const text = await response.text();
      return (text ? JSON.parse(text) : {}) as T;
    } catch (e) {
      throw wrapError(e, deadline, `${init.method} ${init.path}: reading the answer`);
    } finally {
      deadline.done();
    }
  }
}

/**
 * The body of a streamed answer, chunk by chunk: fails with TimeoutError when no bytes come
 * for `idleMs` (berthd's streams carry keepalives), and with the caller's reason on `signal`.
 */
export async function* readChunks(response: Response, idleMs: number, signal?: AbortSignal,
                                  what = 'stream'): AsyncGenerator<Uint8Array> {
  if (!response.body) return;
  const reader = response.body.getReader();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onAbort: (() => void) | undefined;
  try {
    for (;;) {
      const next = await new Promise<ReadableStreamReadResult<Uint8Array>>((resolve, reject) => {
        timer = setTimeout(() => reject(new TimeoutError(
          `${what}: nothing for ${idleMs} ms (streamIdleTimeoutMs)`,
          { code: 'deadline_exceeded', retryable: true })), idleMs);
        if (signal) {
          if (signal.aborted) {
            reject(signal.reason);
            return;
          }
          onAbort = () => reject(signal.reason);
          signal.addEventListener('abort', onAbort, { once: true });
        }
        reader.read().then(resolve, (e: unknown) => reject(e));
      }).finally(() => {
        clearTimeout(timer);
        if (signal && onAbort) signal.removeEventListener('abort', onAbort);
      });
      if (next.done) return;
      yield next.value;
    }
  } catch (e) {
    if (signal?.aborted) throw signal.reason;
    if (e instanceof BerthError) throw e;
    // The connection broke mid-answer: berthd went away, or the workspace stopped under it.
    throw wrapError(e, undefined, `${what}: the stream broke before its end (did the workspace stop?)`);
  } finally {
    reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}

/** NDJSON lines of a streamed answer, parsed (a line over 16 MiB is an error, not growth). */
export async function* readNdjson(response: Response, idleMs: number, signal?: AbortSignal,
                                  what = 'stream'): AsyncGenerator<Record<string, unknown>> {
  const decoder = new TextDecoder();
  let pending = '';
  for await (const chunk of readChunks(response, idleMs, signal, what)) {
    pending += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl).trim();
      pending = pending.slice(nl + 1);
      if (line) yield JSON.parse(line) as Record<string, unknown>;
    }
    if (pending.length > 16 << 20) {
      throw new BerthError(`${what}: an NDJSON line over 16 MiB`, { code: 'internal' });
    }
  }
  const last = (pending + decoder.decode()).trim();
  if (last) yield JSON.parse(last) as Record<string, unknown>;
}

/** Encodes a workspace-relative route: `/v1/workspaces/{ws}` + rest. */
export function wsPath(ws: string, rest = ''): string {
  return `/v1/workspaces/${encodeURIComponent(ws)}${rest}`;
}
