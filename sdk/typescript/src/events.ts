// A workspace's timeline (docs/api.md, "The timeline"): GET …/events, a page at a time or with
// ?follow=1 as an NDJSON stream (the backlog, then live events, with keepalive lines).

import { ApiClient, CallOptions, readNdjson, wsPath } from './client.js';
import { InvalidArgumentError } from './errors.js';

/** One event of a workspace's timeline; fields as on the wire. */
export interface WorkspaceEvent {
  /** Increasing; the cursor of `after`. */
  id: number;
  /** ISO 8601 UTC. */
  at: string;
  /** `created`, `started`, `exec`, `desktop_takeover`, ... (docs/api.md). */
  type: string;
  /** Who caused it: an API key's id (`key_…`), `system`, `guest` or `preview`. */
  actor: string;
  message: string;
  /** Its details: an exec's `cmd` and `exit_code`, a state change's `state`, ... */
  data: Record<string, unknown>;
  /** The workspace's id. */
  workspace: string;
}

export interface EventsOptions extends CallOptions {
  /** Types or families (`'exec'`, `'desktop_*'`), as a comma-separated string or an array. */
  type?: string | readonly string[];
  /** Actors (`key_…`, `system`, `guest`, `preview`) or `key` for every key; string or array. */
  actor?: string | readonly string[];
  /** Events at or after this time: a Date, unix seconds, or an ISO 8601 string. */
  since?: Date | number | string;
  /** Events after this id (default 0: from the start). */
  after?: number;
  /** At most this many (1-1000, default 100); when following, the size of the backlog's pages. */
  limit?: number;
}

/** berthd answers at most this many events a page. */
export const kMaxEventPage = 1000;

function bad(message: string): InvalidArgumentError {
  return new InvalidArgumentError(message, { code: 'invalid_argument' });
}

function joined(name: string, v: string | readonly string[] | undefined): string | undefined {
  if (v === undefined) return undefined;
  if (typeof v === 'string') return v || undefined;
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw bad(`${name} is a string or an array of strings`);
  return v.length ? v.join(',') : undefined;
}

/** `since` as berthd takes it: a Date as ISO 8601 UTC with Z, whole seconds. */
export function formatSince(since: Date | number | string): string {
  if (since instanceof Date) {
    if (Number.isNaN(since.getTime())) throw bad('since is an invalid Date');
    return since.toISOString().replace(/\.\d{3}Z$/, 'Z');
  }
  if (typeof since === 'number') {
    if (!Number.isFinite(since)) throw bad('since is a Date, unix seconds or an ISO 8601 string');
    return String(Math.floor(since));
  }
  if (typeof since === 'string') return since;
  throw bad('since is a Date, unix seconds or an ISO 8601 string');
}

/** The query of GET …/events. */
export function eventQuery(o: EventsOptions): Record<string, string> {
  const after = o.after ?? 0;
  const limit = o.limit ?? 100;
  if (!Number.isInteger(after) || after < 0) throw bad(`after is an event id (0 or more), not ${String(after)}`);
  if (!Number.isInteger(limit) || limit < 1 || limit > kMaxEventPage) throw bad(`limit is 1 to ${kMaxEventPage}, not ${String(limit)}`);
  const q: Record<string, string> = { after: String(after), limit: String(limit) };
  const type = joined('type', o.type);
  if (type) q.type = type;
  const actor = joined('actor', o.actor);
  if (actor) q.actor = actor;
  if (o.since !== undefined) q.since = formatSince(o.since);
  return q;
}

function callOf(o: CallOptions): CallOptions {
  const c: CallOptions = {};
  if (o.requestTimeoutMs !== undefined) c.requestTimeoutMs = o.requestTimeoutMs;
  if (o.signal !== undefined) c.signal = o.signal;
  return c;
}

/** As common/v1/events.cc FollowLineFromJson: `{"type": "keepalive"}` alone is a keepalive. */
function isKeepalive(line: Record<string, unknown>): boolean {
  return Object.keys(line).length === 1 && line.type === 'keepalive';
}

export async function listEvents(client: ApiClient, ws: string, options: EventsOptions): Promise<WorkspaceEvent[]> {
  const answer = await client.json<{ events?: WorkspaceEvent[] }>({
    method: 'GET', path: wsPath(ws, '/events'), query: eventQuery(options), ...callOf(options),
  });
  return answer.events ?? [];
}

async function* follow(client: ApiClient, ws: string, options: EventsOptions, signal: AbortSignal,
                       closed: () => boolean): AsyncGenerator<WorkspaceEvent> {
  const query = { ...eventQuery(options), follow: '1' };
  const call = callOf(options);
  call.signal = signal;
  const { response, deadline } = await client.request({
    method: 'GET', path: wsPath(ws, '/events'), query, headers: { Accept: 'application/x-ndjson' },
    streamResponse: true, ...call,
  });
  // requestTimeoutMs bounds opening the stream; then only the idle limit (keepalives every 15 s).
  deadline.done();
  try {
    for await (const line of readNdjson(response, client.streamIdleTimeoutMs, signal, `follow events of ${ws}`)) {
      if (!isKeepalive(line)) yield line as unknown as WorkspaceEvent;
    }
  } catch (e) {
    if (!closed()) throw e;  // close() ends it quietly
  }
}

/** A live follower of a timeline (Workspace.followEvents): an async iterator of events;
 * close() (or return(), or breaking out of a for await) ends it, even while it waits. */
export class EventFollower implements AsyncIterableIterator<WorkspaceEvent> {
  private readonly controller = new AbortController();
  private readonly events: AsyncGenerator<WorkspaceEvent>;
  private closed = false;

  constructor(client: ApiClient, ws: string, options: EventsOptions) {
    const outer = options.signal;
    if (outer?.aborted) this.controller.abort(outer.reason);
    else outer?.addEventListener('abort', () => this.controller.abort(outer.reason), { once: true });
    this.events = follow(client, ws, options, this.controller.signal, () => this.closed);
  }

  next(): Promise<IteratorResult<WorkspaceEvent>> {
    return this.events.next();
  }

  /** Ends it: a pending next() resolves as done, and the stream is closed. */
  async return(): Promise<IteratorResult<WorkspaceEvent>> {
    await this.close();
    return { done: true, value: undefined };
  }

  async close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.controller.abort(new Error('closed'));
    }
    await this.events.return(undefined);
  }

  [Symbol.asyncIterator](): EventFollower {
    return this;
  }
}
