// A streamed request body (files.upload, files.write of a stream, uploadDir) sent with node:http
// rather than fetch. bench/run-sdk-bench measured undici's streamed request body at about twice
// the CPU of node:http for the same bytes (a pull-based web stream per chunk), and Node's fs
// streams allocate a fresh buffer for every read (page faults, in system time): a 512 MiB upload
// cost 0.6-1.1 s of CPU against 0.2 s for `berth cp`, and the client, not berthd, set the pace.
// Here a file (a path, or an untouched fs.ReadStream of one) is read into a few reused 1 MiB
// buffers, each back in the pool once the socket has taken it, with a Content-Length; any other
// source is written as it comes, at most kMaxInFlight bytes ahead of the socket. Either way the
// memory held is bounded, whatever the file's size.
//
// A streamed body is sent once (never retried: it cannot be read again), within the call's
// deadline, and a non-2xx answer is its typed error, as ApiClient.request does for the rest.

import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import { ApiClient, Deadline, RequestInit2, wrapError } from './client.js';
import { BerthError, errorFrom } from './errors.js';

const kChunk = 1 << 20;      // a file's reads: fewer, larger syscalls and socket writes
const kPoolBuffers = 4;      // a file's reads in flight at most (4 MiB)
const kMaxInFlight = 4 << 20;  // another source's bytes written but not yet taken by the socket
const kMaxAnswer = 1 << 20;  // berthd's JSON answer (or error) is far smaller

/** A body source as upload() takes it. */
export type BodySource = Readable | AsyncIterable<Uint8Array | string> | Blob | ReadableStream<Uint8Array>;

/** A file to send: its path and byte range, when `source` is an fs.ReadStream of a path that
 * nothing has read from yet (its own file descriptor is then closed unused). */
function fileOf(source: BodySource): { path: string; start: number; end: number } | undefined {
  if (!(source instanceof fs.ReadStream)) return undefined;
  const s = source as fs.ReadStream & { start?: number; end?: number; readableDidRead?: boolean };
  if (typeof s.path !== 'string' || s.destroyed || s.readableFlowing !== null || s.readableDidRead) return undefined;
  if (s.listenerCount('data') > 0 || s.listenerCount('readable') > 0) return undefined;
  return { path: s.path, start: s.start ?? 0, end: s.end ?? Infinity };
}

interface Chunk { data: Uint8Array; release: () => void }

/** A file's bytes [start, end] in reused buffers: a buffer comes back to the pool by `release`,
 * once the socket has taken it. Throws when the file ends before the length it had at open. */
async function* fileChunks(fd: fs.promises.FileHandle, start: number, length: number): AsyncGenerator<Chunk> {
  const free: Buffer[] = [];
  for (let i = 0; i < kPoolBuffers; ++i) free.push(Buffer.allocUnsafeSlow(kChunk));
  let waiting: (() => void) | undefined;
  let position = start;
  let left = length;
  while (left > 0) {
    while (free.length === 0) await new Promise<void>((resolve) => { waiting = resolve; });
    const buffer = free.pop() as Buffer;
    const { bytesRead } = await fd.read(buffer, 0, Math.min(kChunk, left), position);
    if (bytesRead === 0) {
      throw new BerthError(`the file ended ${left} bytes before the size it had when the upload began`,
                           { code: 'failed_precondition' });
    }
    position += bytesRead;
    left -= bytesRead;
    yield {
      data: bytesRead === buffer.length ? buffer : buffer.subarray(0, bytesRead),
      release: () => {
        free.push(buffer);
        const wake = waiting;
        waiting = undefined;
        wake?.();
      },
    };
  }
}

async function* anyChunks(source: BodySource): AsyncGenerator<Chunk> {
  const iterable: AsyncIterable<Uint8Array | string> = source instanceof Blob
    ? (source.stream() as unknown as AsyncIterable<Uint8Array>)
    : (source as AsyncIterable<Uint8Array | string>);
  const noop = () => {};
  for await (const c of iterable) {
    const data = typeof c === 'string' ? Buffer.from(c, 'utf8') : c;
    if (data.length > 0) yield { data, release: noop };
  }
}

/**
 * PUTs (or POSTs) `source` as the body of `init` and returns berthd's JSON answer. Deadline:
 * init.requestTimeoutMs (else the client's) over the whole exchange; init.signal cancels it.
 */
export async function sendBody<T>(client: ApiClient, init: RequestInit2, source: BodySource): Promise<T> {
  const what = `${init.method} ${init.path}`;
  const deadline = new Deadline(init.requestTimeoutMs ?? client.requestTimeoutMs, init.signal);
  const headers: Record<string, string> = { 'User-Agent': 'berth-sdk-typescript/0.1', ...init.headers };
  if (client.apiKey) headers.Authorization = `Bearer ${client.apiKey}`;
  const file = fileOf(source);
  let handle: fs.promises.FileHandle | undefined;
  let chunks: AsyncGenerator<Chunk> | undefined;
  try {
    // A regular file only: a FIFO or a device has no size to send ahead and is read as a stream.
    if (file) handle = await fs.promises.open(file.path, 'r').catch(() => undefined);
    const stat = handle ? await handle.stat() : undefined;
    if (file && handle && stat?.isFile()) {
      (source as fs.ReadStream).destroy();  // its own descriptor, never read
      const size = stat.size;
      const length = Math.max(0, Math.min(size - 1, file.end) - file.start + 1);
      headers['Content-Length'] = String(length);
      chunks = fileChunks(handle, file.start, length);
    } else {
      await handle?.close();
      handle = undefined;
      if (source instanceof Blob) headers['Content-Length'] = String(source.size);
      chunks = anyChunks(source);
    }
    return await exchange<T>(client.url(init.path, init.query), init.method, headers, chunks, deadline, what);
  } catch (e) {
    throw wrapError(e, deadline, what);
  } finally {
    deadline.done();
    await handle?.close().catch(() => {});
  }
}

function exchange<T>(url: string, method: string, headers: Record<string, string>, chunks: AsyncGenerator<Chunk>,
                     deadline: Deadline, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const u = new URL(url);
    const transport = u.protocol === 'https:' ? https : http;
    // agent false: a connection of its own, closed after. A streamed body is never sent twice, so
    // it must not go out on a kept-alive connection that the server may just have closed.
    const req = transport.request(u, { method, headers, agent: false });
    let settled = false;
    let answered = false;
    const fail = (e: unknown) => {
      if (settled) return;
      settled = true;
      req.destroy();
      chunks.return(undefined).catch(() => {});
      reject(e);
    };
    const onAbort = () => fail(deadline.signal.reason);
    if (deadline.signal.aborted) {
      onAbort();
      return;
    }
    deadline.signal.addEventListener('abort', onAbort, { once: true });
    req.on('error', (e) => {
      // An answer that came before the body was all sent (a 4xx, berthd then closing) wins over
      // the write error it causes.
      if (!answered) fail(e);
    });
    req.on('response', (res) => {
      answered = true;
      const parts: Buffer[] = [];
      let size = 0;
      res.on('data', (d: Buffer) => {
        size += d.length;
        if (size <= kMaxAnswer) parts.push(d);
      });
      res.on('error', fail);
      res.on('end', () => {
        if (settled) return;
        const text = Buffer.concat(parts).toString('utf8');
        const status = res.statusCode ?? 0;
        let parsed: unknown;
        try {
          parsed = text ? JSON.parse(text) : {};
        } catch {
          parsed = undefined;
        }
        settled = true;
        deadline.signal.removeEventListener('abort', onAbort);
        req.destroy();
        chunks.return(undefined).catch(() => {});
        if (status >= 200 && status < 300) {
          if (parsed === undefined) {
            reject(new BerthError(`${what}: the answer is not JSON: ${text.slice(0, 200)}`, { code: 'internal', status }));
          } else {
            resolve(parsed as T);
          }
        } else {
          reject(errorFrom(status, parsed, `${what}: HTTP ${status} ${text.slice(0, 200)}`));
        }
      });
    });
    (async () => {
      for await (const chunk of chunks) {
        if (settled || answered) return;
        req.write(chunk.data, () => chunk.release());
        // The pool bounds a file's reads; anything else waits for the socket past kMaxInFlight.
        while (req.writableLength > kMaxInFlight && !settled && !answered) {
          await new Promise<void>((resolve) => {
            const done = () => {
              req.off('drain', done);
              req.off('close', done);
              resolve();
            };
            req.once('drain', done);
            req.once('close', done);
          });
        }
      }
      if (!settled && !answered) req.end();
    })().catch(fail);
  });
}
