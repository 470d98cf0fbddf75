// ws.files: the agent's files API through berthd. Paths are absolute guest paths. Uploads and
// downloads stream: a file passes through in chunks and is never held whole in memory.

import { Readable } from 'node:stream';
import { ApiClient, CallOptions, RequestInit2, readChunks, readNdjson, wsPath } from './client.js';
import { DirTransfer, extractInto, packDir } from './dirs.js';
import { BerthError, InvalidArgumentError, NotFoundError, UnavailableError } from './errors.js';
import { sendBody } from './upload.js';

/** A change in a watched directory. */
export interface FilesystemEvent {
  /** "created", "modified", "deleted", "moved_from", "moved_to", or "error" (a subdirectory
   * that could not be watched, or lost events: `message` says which). */
  type: string;
  path: string;
  /** The last component of `path`. */
  name: string;
  isDir: boolean;
  message?: string;
}

export interface WatchOptions extends FileOptions {
  /** What is below the directory too (default false). */
  recursive?: boolean;
  /** Called once when the watch ends: undefined after stop() or the directory's removal, the
   * error otherwise (UnavailableError when the workspace stopped). */
  onExit?: (error?: unknown) => void;
}

/** A directory being watched: stop() ends it. */
export class WatchHandle {
  /** @internal */
  constructor(private readonly controller: AbortController, private readonly done: Promise<void>) {}

  /** Stops watching: no event reaches onEvent after this. */
  async stop(): Promise<void> {
    this.controller.abort();
    await this.done.catch(() => {});
  }

  /** Resolves when the watch ends by stop() or the directory's removal; rejects with its error
   * (UnavailableError when the workspace stopped). */
  wait(): Promise<void> {
    return this.done;
  }
}

/** A file or directory as the agent describes it. */
export interface EntryInfo {
  name: string;
  path: string;
  /** "file", "dir", "symlink", ... as the agent says. */
  type: string;
  size: number;
  /** Octal permission bits, e.g. "0644". */
  mode: string;
  mtime: string;
  uid: number;
  gid: number;
  owner: string;
  group: string;
  link_target?: string;
}

export interface FileOptions extends CallOptions {
  /** The user the operation runs as (default: the agent's default user). */
  user?: string;
}

export type UploadSource = Readable | AsyncIterable<Uint8Array> | Blob | ReadableStream<Uint8Array>;

function filePath(ws: string, path: string): string {
  if (!path.startsWith('/')) {
    throw new InvalidArgumentError(`path must be absolute: '${path}'`, { code: 'invalid_argument' });
  }
  return wsPath(ws, '/files' + path.split('/').map(encodeURIComponent).join('/'));
}

export class Files {
  constructor(private readonly client: ApiClient, private readonly ws: string) {}

  private call(options: FileOptions, extra: Partial<RequestInit2> & Pick<RequestInit2, 'method' | 'path'>): RequestInit2 {
    const { user, ...call } = options;
    return { ...call, ...extra, query: { ...extra.query, user } };
  }

  /** A file's content: text (default), bytes, or a stream (as download()). */
  read(path: string, options?: FileOptions & { format?: 'text' }): Promise<string>;
  read(path: string, options: FileOptions & { format: 'bytes' }): Promise<Uint8Array>;
  read(path: string, options: FileOptions & { format: 'stream' }): Promise<ReadableStream<Uint8Array>>;
  async read(path: string, options: FileOptions & { format?: 'text' | 'bytes' | 'stream' } = {})
      : Promise<string | Uint8Array | ReadableStream<Uint8Array>> {
    const { format, ...rest } = options;
    if (format === 'stream') return this.download(path, rest);
    const { response, deadline } = await this.client.request(
        this.call(rest, { method: 'GET', path: filePath(this.ws, path), streamResponse: true }));
    try {
      const bytes = new Uint8Array(await response.arrayBuffer());
      return format === 'bytes' ? bytes : new TextDecoder().decode(bytes);
    } finally {
      deadline.done();
    }
  }

  /** Writes a file whole (atomically: temporary file, fsync, rename; parents created).
   * `data` may be a string, bytes, a Blob or a stream (then it streams as upload() does). */
  async write(path: string, data: string | Uint8Array | ArrayBuffer | UploadSource,
              options: FileOptions & { mode?: string } = {}): Promise<EntryInfo> {
    const { mode, ...rest } = options;
    let source: UploadSource;
    if (typeof data === 'string') source = new Blob([data as BlobPart]);
    else if (data instanceof Uint8Array || data instanceof ArrayBuffer) source = new Blob([data as BlobPart]);
    else source = data;
    return this.put(path, source, rest, mode);
  }

  /** Streams `source` into `path`: read chunk by chunk as the network takes it. */
  upload(path: string, source: UploadSource, options: FileOptions & { mode?: string } = {}): Promise<EntryInfo> {
    const { mode, ...rest } = options;
    return this.put(path, source, rest, mode);
  }

  private async put(path: string, source: UploadSource, options: FileOptions, mode?: string): Promise<EntryInfo> {
    // Sent with node:http (upload.ts): Content-Length for a file or a Blob, chunked otherwise.
    // The deadline covers the whole transfer: a large file needs a larger requestTimeoutMs
    // (the default is raised to 1 hour for uploads).
    const init = this.call({ requestTimeoutMs: 3_600_000, ...options }, {
      method: 'PUT', path: filePath(this.ws, path), headers: { 'Content-Type': 'application/octet-stream' },
      query: mode !== undefined ? { mode } : {},
    });
    return sendBody<EntryInfo>(this.client, init, source);
  }

  /** A file's bytes as a stream (also an async iterable of Uint8Array), with the connection's
   * idle limit between chunks; requestTimeoutMs bounds the wait for the answer to begin. */
  async download(path: string, options: FileOptions = {}): Promise<ReadableStream<Uint8Array>> {
    const { response, deadline } = await this.client.request(
        this.call(options, { method: 'GET', path: filePath(this.ws, path), streamResponse: true }));
    deadline.done();
    const chunks = readChunks(response, this.client.streamIdleTimeoutMs, options.signal, `download ${path}`);
    return new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const next = await chunks.next();
          if (next.done) controller.close();
          else controller.enqueue(next.value);
        } catch (e) {
          controller.error(e);
        }
      },
      async cancel() {
        await chunks.return(undefined);
      },
    }, { highWaterMark: 1 });
  }

  /** Watches a directory: each change reaches onEvent as it happens. Resolves once the watch
   * is in place (a change made after it is seen; a missing path is NotFoundError here). */
  async watchDir(path: string, onEvent: (event: FilesystemEvent) => void | Promise<void>,
                 options: WatchOptions = {}): Promise<WatchHandle> {
    const { recursive, onExit, ...rest } = options;
    const { response, deadline } = await this.client.request(this.call(rest, {
      method: 'GET', path: filePath(this.ws, path), query: { watch: 1, recursive: recursive ? 1 : undefined },
      streamResponse: true,
    }));
    deadline.done();
    const controller = new AbortController();
    const what = `watch ${path}`;
    const done = (async () => {
      let error: unknown;
      try {
        for await (const e of readNdjson(response, this.client.streamIdleTimeoutMs, controller.signal, what)) {
          if (controller.signal.aborted) break;
          if (e.type === 'keepalive') continue;
          const p = typeof e.path === 'string' ? e.path : '';
          const event: FilesystemEvent = {
            type: String(e.type), path: p, name: p.slice(p.lastIndexOf('/') + 1), isDir: e.is_dir === true,
          };
          if (typeof e.message === 'string' && e.message) event.message = e.message;
          await onEvent(event);
        }
      } catch (e) {
        if (!controller.signal.aborted) {
          error = e instanceof UnavailableError
            ? new UnavailableError(`${what}: the stream broke (did the workspace stop?): ${e.message}`,
                                   { code: 'unavailable', retryable: true, cause: e })
            : e;
        }
      }
      onExit?.(error);
      if (error !== undefined) throw error;
    })();
    done.catch(() => {});  // kept for wait(); never an unhandled rejection
    return new WatchHandle(controller, done);
  }

  /** Copies what is in `localDir` into `remoteDir` (made with its parents; files there are
   * replaced, others kept) as one tar stream made while it is sent. Symlinks stay symlinks.
   * requestTimeoutMs: default 1 hour. */
  async uploadDir(localDir: string, remoteDir: string, options: FileOptions = {}): Promise<DirTransfer> {
    const counts: DirTransfer = { entries: 0, bytes: 0, skipped: 0 };
    const target = filePath(this.ws, remoteDir);
    const body = await packDir(localDir, counts);
    const answer = await sendBody<{ entries?: number; bytes?: number }>(this.client,
      this.call({ requestTimeoutMs: 3_600_000, ...options }, {
        method: 'PUT', path: target, query: { archive: 'tar' }, headers: { 'Content-Type': 'application/x-tar' },
      }), body);
    return { entries: answer.entries ?? counts.entries, bytes: answer.bytes ?? counts.bytes, skipped: counts.skipped };
  }

  /** Copies what is in `remoteDir` into `localDir` (made if missing), extracting the tar
   * stream as it arrives. An entry that would land outside localDir (an absolute name, '..',
   * a path through a symlink) is refused with InvalidArgumentError; set-id bits are cleared
   * and FIFOs left out. requestTimeoutMs bounds the wait for the answer to begin. */
  async downloadDir(remoteDir: string, localDir: string, options: FileOptions = {}): Promise<DirTransfer> {
    const { response, deadline } = await this.client.request(this.call(options, {
      method: 'GET', path: filePath(this.ws, remoteDir), query: { archive: 'tar' }, streamResponse: true,
    }));
    deadline.done();
    const counts: DirTransfer = { entries: 0, bytes: 0, skipped: 0 };
    await extractInto(readChunks(response, this.client.streamIdleTimeoutMs, options.signal,
                                 `download_dir ${remoteDir}`), localDir, counts);
    return counts;
  }

  /** A directory's entries. */
  async list(path: string, options: FileOptions = {}): Promise<EntryInfo[]> {
    const answer = await this.client.json<{ entries?: EntryInfo[] }>(
        this.call(options, { method: 'GET', path: filePath(this.ws, path) }));
    if (!Array.isArray(answer.entries)) {
      throw new InvalidArgumentError(`${path} is not a directory`, { code: 'invalid_argument' });
    }
    return answer.entries;
  }

  /** What `path` is (NotFoundError when nothing is there). */
  getInfo(path: string, options: FileOptions = {}): Promise<EntryInfo> {
    return this.client.json<EntryInfo>(
        this.call(options, { method: 'GET', path: filePath(this.ws, path), query: { stat: 1 } }));
  }

  /** Whether anything is at `path`. */
  async exists(path: string, options: FileOptions = {}): Promise<boolean> {
    try {
      await this.getInfo(path, options);
      return true;
    } catch (e) {
      if (e instanceof NotFoundError) return false;
      throw e;
    }
  }

  /** Removes a file, or a directory with everything in it (as E2B's remove does). */
  async remove(path: string, options: FileOptions & { recursive?: boolean } = {}): Promise<void> {
    const { recursive, ...rest } = options;
    await this.client.json(this.call(rest, {
      method: 'DELETE', path: filePath(this.ws, path), query: { recursive: recursive === false ? 0 : 1 },
    }));
  }

  /** Moves `oldPath` to `newPath` (an existing file there is an error unless `overwrite`). */
  rename(oldPath: string, newPath: string, options: FileOptions & { overwrite?: boolean } = {}): Promise<EntryInfo> {
    const { overwrite, ...rest } = options;
    if (!newPath.startsWith('/')) {
      throw new InvalidArgumentError(`path must be absolute: '${newPath}'`, { code: 'invalid_argument' });
    }
    return this.client.json<EntryInfo>(this.call(rest, {
      method: 'POST', path: filePath(this.ws, oldPath),
      query: { op: 'move', to: newPath, overwrite: overwrite ? 1 : undefined },
    }));
  }

  /** Makes a directory and its parents; false when it already existed. */
  async makeDir(path: string, options: FileOptions & { mode?: string } = {}): Promise<boolean> {
    const { mode, ...rest } = options;
    const { response, deadline } = await this.client.request(this.call(rest, {
      method: 'POST', path: filePath(this.ws, path), query: { op: 'mkdir', parents: 1, mode },
      streamResponse: true,
    }));
    try {
      await response.arrayBuffer();
    } finally {
      deadline.done();
    }
    return response.status === 201;
  }
}
