// Workspace: one Berth VM, its lifecycle, and its commands, files, previews and checkpoints;
// new ones made from a template or forked from another (docs/api.md, "Forks", "Templates").

import { randomBytes } from 'node:crypto';
import { ApiClient, CallOptions, ConnectionOptions, wsPath } from './client.js';
import { Commands } from './commands.js';
import { ConflictError, InvalidArgumentError, NotFoundError, TimeoutError } from './errors.js';
import { Files } from './files.js';
import { Previews } from './previews.js';
import { Pty } from './pty.js';
import { Network } from './network.js';
import { Desktop } from './desktop.js';
import { Checkpoint, CheckpointScopeOptions, CheckpointTransaction, Checkpoints, CreateCheckpointOptions } from './checkpoints.js';
import { EventFollower, EventsOptions, WorkspaceEvent, listEvents } from './events.js';

export type WorkspaceState = 'creating' | 'starting' | 'running' | 'stopping' | 'stopped' |
  'hibernating' | 'hibernated' | 'deleting' | 'error';

/** A workspace as berthd returns it (docs/api.md, "Workspaces"); fields as on the wire. */
export interface WorkspaceInfo {
  id: string;
  name: string;
  tenant: string;
  image: string;
  image_version: string;
  size: string;
  cpus: number;
  memory_mib: number;
  disk_gib: number;
  idle_timeout: number;
  idle_action: 'stop' | 'hibernate' | string;
  max_runtime: number | null;
  auto_start: boolean;
  env: Record<string, string>;
  labels: Record<string, string>;
  state: WorkspaceState;
  error: string | null;
  transport: string;
  created_at: string;
  updated_at: string;
  started_at: string | null;
  last_active_at: string | null;
  network?: { egress: string; allow: string[] };
  awake?: { reasons: string[]; idle_at: string | null };
  /** The desktop's screen, `WIDTHxHEIGHT` (`1280x800` unless set at create). */
  screen?: string;
  /** A fork's: the checkpoint (another workspace's) its disks were made on. */
  forked_from?: string | null;
}

/** A listening port as GET …/ports reports it. */
export interface ListeningPort {
  port: number;
  address: string;
  preview_url?: string;
  [key: string]: unknown;
}

/** A duration: seconds, or a string such as "90s", "30m", "2h", "1d". */
export type Duration = number | string;

/** What a fork is made from (POST /v1/workspaces `from`). */
export interface ForkSource {
  /** The source workspace: its id, its name, or a Workspace. */
  workspace: string | { readonly id: string };
  /** A checkpoint of it (id or name); without one, berthd takes one now (with memory when the
   * workspace runs or is hibernated: the fork resumes its programs instead of booting). */
  checkpoint?: string;
}

export interface CreateOptions extends ConnectionOptions, CallOptions {
  /** Unique in the tenant; default `ws-` and 8 random hex digits. */
  name?: string;
  /** Default `base`. */
  image?: string;
  /** `small`, `medium`, ... (default `small`). */
  size?: string;
  /** Idle time before `idleAction` (default 1800 s). */
  idleTimeout?: Duration;
  idleAction?: 'stop' | 'hibernate';
  maxRuntime?: Duration;
  autoStart?: boolean;
  env?: Record<string, string>;
  labels?: Record<string, string>;
  network?: { egress?: 'open' | 'none' | 'allowlist'; allow?: string[] };
  /** The desktop's size, `WIDTHxHEIGHT` (width 640-3840 and a multiple of 8, height 480-2160;
   * default `1280x800`). */
  screen?: string;
  /** Make it from this template (a name or id; see Templates): it starts with the template's
   * programs already running. NotFoundError for an unknown one. Only `name` and `labels` may
   * be given beside it. */
  template?: string;
  /** Make it a fork of this workspace's checkpoint, or of one taken of it now (docs/api.md,
   * "Forks"). It has its source's image, size, settings, env and network policy: only `name`
   * and `labels` may be given beside it (any other is berthd's InvalidArgumentError). */
  from?: ForkSource;
  /** Return only once it runs (default true), waiting with berthd's POST …/wait. */
  wait?: boolean;
  /** How long to wait for it to run (default 300 000 ms). */
  waitTimeoutMs?: number;
}

export interface ForkOptions extends CallOptions {
  /** Its name (default `ws-` and 8 random hex digits). */
  name?: string;
  /** Fork this checkpoint (id or name) of the workspace; default: one taken of it now. */
  checkpoint?: string;
  /** Its labels (the rest of its settings are its source's). */
  labels?: Record<string, string>;
  /** Return only once it runs (default true). */
  wait?: boolean;
  /** How long to wait for it to run (default 300 000 ms). */
  waitTimeoutMs?: number;
}

export interface ListOptions extends ConnectionOptions, CallOptions {
  state?: WorkspaceState;
  /** `key=value`, or an object of one or more labels (all must match). */
  label?: string | Record<string, string>;
  /** Page size (berthd's default when left out). */
  limit?: number;
}

const kDefaultWaitMs = 300_000;

/** Seconds from a Duration ("90s", "30m", "2h", "1d", or a number of seconds). */
export function toSeconds(d: Duration): number {
  if (typeof d === 'number') return Math.round(d);
  const m = /^\s*(\d+)\s*(s|m|h|d)?\s*$/.exec(d);
  if (!m) throw new InvalidArgumentError(`not a duration: '${d}' (want 90s, 30m, 2h, 1d)`, { code: 'invalid_argument' });
  const unit = { s: 1, m: 60, h: 3600, d: 86400 }[(m[2] ?? 's') as 's' | 'm' | 'h' | 'd'];
  return Number(m[1]) * unit;
}

function callOf(o: CallOptions): CallOptions {
  const c: CallOptions = {};
  if (o.requestTimeoutMs !== undefined) c.requestTimeoutMs = o.requestTimeoutMs;
  if (o.signal !== undefined) c.signal = o.signal;
  return c;
}

/** The wire's `from`: the source workspace as an id or name. */
function fromJson(source: ForkSource): Record<string, string> {
  const from: Record<string, string> = {
    workspace: typeof source.workspace === 'string' ? source.workspace : source.workspace.id,
  };
  if (source.checkpoint !== undefined) from.checkpoint = source.checkpoint;
  return from;
}

export class Workspace {
  /** Its commands: run, background processes, list, connect. */
  readonly commands: Commands;
  /** Its files: read, write, list, upload, download, ... */
  readonly files: Files;
  /** Its preview links. */
  readonly previews: Previews;
  /** Its interactive terminals. */
  readonly pty: Pty;
  /** What its guest may reach. */
  readonly network: Network;
  /** Who controls its desktop, and viewer tickets. */
  readonly desktop: Desktop;
  /** Its disks kept and brought back: create, list, get, delete, restore, diff, fork. */
  readonly checkpoints: Checkpoints;
  private data: WorkspaceInfo;

  private constructor(private readonly client: ApiClient, info: WorkspaceInfo) {
    this.data = info;
    this.commands = new Commands(client, info.id);
    this.files = new Files(client, info.id);
    this.previews = new Previews(client, info.id);
    this.pty = new Pty(client, info.id);
    this.network = new Network(client, info.id);
    this.desktop = new Desktop(client, info.id);
    this.checkpoints = new Checkpoints(client, {
      id: info.id,
      name: info.name,
      waitFor: (state, timeoutMs, signal) => this.waitFor(state, timeoutMs, signal),
      seen: (latest) => { this.data = latest; },
      adopt: async (infos, wait, waitTimeoutMs = kDefaultWaitMs, signal) => {
        const forks = infos.map((made) => new Workspace(this.client, made));
        // They boot at once: waiting for one after the other takes as long as the slowest.
        const deadline = Date.now() + waitTimeoutMs;
        for (const fork of wait ? forks : []) {
          if (fork.state !== 'running') await fork.waitFor('running', Math.max(1, deadline - Date.now()), signal);
        }
        return forks;
      },
    });
  }

  get id(): string { return this.data.id; }
  get name(): string { return this.data.name; }
  /** The state when last seen (info() refreshes it). */
  get state(): WorkspaceState { return this.data.state; }
  /** What berthd last said about it. */
  get lastInfo(): WorkspaceInfo { return this.data; }

  /** Creates a workspace and (unless `wait: false`) waits until it runs. Safe to retry: the
   * request carries an Idempotency-Key, so a retry after a lost answer makes no second one.
   * With `template` or `from` it is a fork (of the template's checkpoint, or of a workspace):
   * berthd takes no Idempotency-Key for those, so the client never sends them twice on its
   * own (a 503 with Retry-After aside, which berthd answers without acting). */
  static async create(options: CreateOptions = {}): Promise<Workspace> {
    return Workspace.make(new ApiClient(options), Workspace.createBody(options), options);
  }

  /** POST /v1/workspaces's body: the options given, in berthd's names. */
  private static createBody(options: CreateOptions): Record<string, unknown> {
    const body: Record<string, unknown> = { name: options.name ?? `ws-${randomBytes(4).toString('hex')}` };
    if (options.image !== undefined) body.image = options.image;
    if (options.size !== undefined) body.size = options.size;
    if (options.idleTimeout !== undefined) body.idle_timeout = toSeconds(options.idleTimeout);
    if (options.idleAction !== undefined) body.idle_action = options.idleAction;
    if (options.maxRuntime !== undefined) body.max_runtime = toSeconds(options.maxRuntime);
    if (options.autoStart !== undefined) body.auto_start = options.autoStart;
    if (options.env !== undefined) body.env = options.env;
    if (options.labels !== undefined) body.labels = options.labels;
    if (options.network !== undefined) body.network = options.network;
    if (options.screen !== undefined) body.screen = options.screen;
    if (options.template !== undefined) body.template = options.template;
    if (options.from !== undefined) body.from = fromJson(options.from);
    return body;
  }

  private static async make(client: ApiClient, body: Record<string, unknown>,
                            options: CallOptions & { wait?: boolean; waitTimeoutMs?: number }): Promise<Workspace> {
    const fork = 'template' in body || 'from' in body;
    const info = await client.json<WorkspaceInfo>({
      method: 'POST', path: '/v1/workspaces', json: body, idempotencyKey: !fork, ...callOf(options),
    });
    const ws = new Workspace(client, info);
    if (options.wait !== false && ws.state !== 'running') {
      await ws.waitFor('running', options.waitTimeoutMs, options.signal);
    }
    return ws;
  }

  /** A workspace by id or name; a stopped or hibernated one is started, and it is returned
   * once it runs (`wait: false`: at once). */
  static async connect(nameOrId: string,
                       options: ConnectionOptions & CallOptions & { wait?: boolean; waitTimeoutMs?: number } = {}): Promise<Workspace> {
    const client = new ApiClient(options);
    const info = await client.json<WorkspaceInfo>({ method: 'GET', path: wsPath(nameOrId), ...callOf(options) });
    const ws = new Workspace(client, info);
    // One on its way down is let land first: start is refused while it stops.
    if (info.state === 'stopping' || info.state === 'hibernating') {
      await ws.waitFor(info.state === 'stopping' ? 'stopped' : 'hibernated', options.waitTimeoutMs, options.signal);
    }
    if (ws.state === 'stopped' || ws.state === 'hibernated') {
      ws.data = await client.json<WorkspaceInfo>({ method: 'POST', path: wsPath(info.id, '/start'), ...callOf(options) });
    }
    if (options.wait !== false && ws.state !== 'running') {
      await ws.waitFor('running', options.waitTimeoutMs, options.signal);
    }
    return ws;
  }

  /** connect(name), or create({...options, name}) when there is none. */
  static async getOrCreate(name: string, options: Omit<CreateOptions, 'name'> = {}): Promise<Workspace> {
    try {
      return await Workspace.connect(name, options);
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
    }
    try {
      return await Workspace.create({ ...options, name });
    } catch (e) {
      // Another caller made it between the two calls.
      if (e instanceof ConflictError && e.code === 'already_exists') return Workspace.connect(name, options);
      throw e;
    }
  }

  /** Every workspace of the key's tenant (optionally by state and labels), page after page. */
  static async *list(options: ListOptions = {}): AsyncGenerator<WorkspaceInfo> {
    const client = new ApiClient(options);
    const labels = typeof options.label === 'string' ? [options.label]
      : Object.entries(options.label ?? {}).map(([k, v]) => `${k}=${v}`);
    let after: string | null = null;
    do {
      const params = new URLSearchParams();
      if (options.state) params.set('state', options.state);
      for (const l of labels) params.append('label', l);
      if (options.limit !== undefined) params.set('limit', String(options.limit));
      if (after) params.set('after', after);
      const query = params.toString();
      const page: { workspaces: WorkspaceInfo[]; next: string | null } = await client.json({
        method: 'GET', path: `/v1/workspaces${query ? `?${query}` : ''}`, ...callOf(options),
      });
      yield* page.workspaces;
      after = page.next;
    } while (after);
  }

  /** Waits (berthd's POST …/wait, no polling) until it is in `state`; ConflictError if it
   * lands in `error` or a state it cannot leave by itself, TimeoutError after `timeoutMs`. */
  async waitFor(state: WorkspaceState, timeoutMs = kDefaultWaitMs, signal?: AbortSignal): Promise<WorkspaceInfo> {
    const timeoutS = Math.max(1, Math.ceil(timeoutMs / 1000));
    const call: CallOptions = { requestTimeoutMs: timeoutS * 1000 + this.client.requestTimeoutMs };
    if (signal) call.signal = signal;
    this.data = await this.client.json<WorkspaceInfo>({
      method: 'POST', path: wsPath(this.id, '/wait'), json: { state, timeout_s: timeoutS }, ...call,
    });
    return this.data;
  }

  /** Fresh information from berthd. */
  async info(options: CallOptions = {}): Promise<WorkspaceInfo> {
    this.data = await this.client.json<WorkspaceInfo>({ method: 'GET', path: wsPath(this.id), ...options });
    return this.data;
  }

  /** A page of its timeline, oldest first: at most `limit` (1-1000, default 100) events after
   * the event id `after`, filtered by `type` (`'exec'`, a family `'desktop_*'`, or an array),
   * `actor` (`'key_…'`, `'system'`, `'guest'`, `'preview'`, `'key'` for every key) and `since`
   * (a Date, unix seconds or ISO 8601). */
  events(options: EventsOptions = {}): Promise<WorkspaceEvent[]> {
    return listEvents(this.client, this.id, options);
  }

  /** Its timeline live: every event after `after` that passes the filters (as events()), the
   * backlog first, then each as it happens, until close() (or breaking out of the loop),
   * `signal` aborts, or the workspace is deleted. `requestTimeoutMs` bounds opening it; then a
   * stream silent for `streamIdleTimeoutMs` (keepalives come every 15 s) fails. */
  followEvents(options: EventsOptions = {}): EventFollower {
    return new EventFollower(this.client, this.id, options);
  }

  private async lifecycle(action: string, body: unknown, target: WorkspaceState,
                          options: CallOptions & { wait?: boolean; waitTimeoutMs?: number }): Promise<WorkspaceInfo> {
    this.data = await this.client.json<WorkspaceInfo>({
      method: 'POST', path: wsPath(this.id, `/${action}`), ...(body === undefined ? {} : { json: body }),
      ...callOf(options),
    });
    if (options.wait !== false && this.data.state !== target) {
      return this.waitFor(target, options.waitTimeoutMs, options.signal);
    }
    return this.data;
  }

  /** Starts it (a hibernated one resumes) and waits until it runs. */
  start(options: CallOptions & { wait?: boolean; waitTimeoutMs?: number } = {}): Promise<WorkspaceInfo> {
    return this.lifecycle('start', undefined, 'running', options);
  }

  /** Stops it (ACPI power-off; `force`: at once) and waits until it is stopped. */
  stop(options: CallOptions & { force?: boolean; wait?: boolean; waitTimeoutMs?: number } = {}): Promise<WorkspaceInfo> {
    return this.lifecycle('stop', options.force ? { force: true } : undefined, 'stopped', options);
  }

  /** Saves its memory and processes to disk and waits until it is hibernated. */
  hibernate(options: CallOptions & { wait?: boolean; waitTimeoutMs?: number } = {}): Promise<WorkspaceInfo> {
    return this.lifecycle('hibernate', undefined, 'hibernated', options);
  }

  /** Deletes it: domain and disks are removed in the background (berthd answers `deleting`). */
  async delete(options: CallOptions = {}): Promise<void> {
    this.data = await this.client.json<WorkspaceInfo>({ method: 'DELETE', path: wsPath(this.id), ...options });
  }

  /** E2B's name for delete(). */
  kill(options: CallOptions = {}): Promise<void> {
    return this.delete(options);
  }

  /** Sets what happens when it is idle: after `timeout` (a Duration), `action`. */
  async setIdle(idle: { timeout?: Duration; action?: 'stop' | 'hibernate' }, options: CallOptions = {}): Promise<WorkspaceInfo> {
    const body: Record<string, unknown> = {};
    if (idle.timeout !== undefined) body.idle_timeout = toSeconds(idle.timeout);
    if (idle.action !== undefined) body.idle_action = idle.action;
    this.data = await this.client.json<WorkspaceInfo>({ method: 'PATCH', path: wsPath(this.id), json: body, ...options });
    return this.data;
  }

  /** The TCP ports listening in the workspace (GET …/ports), each with its preview URL. */
  async ports(options: CallOptions = {}): Promise<ListeningPort[]> {
    const answer = await this.client.json<{ ports: ListeningPort[] }>({ method: 'GET', path: wsPath(this.id, '/ports'), ...options });
    return answer.ports;
  }

  /** Waits until something listens on `port` in the workspace (a server started in the
   * background takes a moment); TimeoutError after `timeoutMs` (default 60 000). Returns
   * `port`. Asks every 100 ms: the agent has no event for it. */
  async waitForPort(port: number, options: CallOptions & { timeoutMs?: number } = {}): Promise<number> {
    const deadline = Date.now() + (options.timeoutMs ?? 60_000);
    for (;;) {
      const call: CallOptions = { requestTimeoutMs: Math.max(1, Math.min(this.client.requestTimeoutMs, deadline - Date.now())) };
      if (options.signal) call.signal = options.signal;
      if ((await this.ports(call)).some((p) => p.port === port)) return port;
      if (Date.now() + 100 > deadline) {
        throw new TimeoutError(`nothing listens on port ${port} in ${this.name} after ${options.timeoutMs ?? 60_000} ms`,
                               { code: 'deadline_exceeded', retryable: true });
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** A new workspace made from this one (docs/api.md, "Forks"): from its checkpoint
   * `checkpoint` (id or name), or without one from a checkpoint taken now (with memory when it
   * runs or is hibernated: the fork resumes its programs instead of booting). The fork is a
   * machine of its own with this one's image, size, settings, env and network policy; only its
   * name and labels are its own. Returned once it runs (`wait: false`: at once). The same as
   * `Workspace.create({ from: { workspace: ws, checkpoint } })` on this one's connection; for
   * several at once from one checkpoint, `checkpoints.fork(cp, { count })`. */
  fork(options: ForkOptions = {}): Promise<Workspace> {
    const from: ForkSource = { workspace: this.id };
    if (options.checkpoint !== undefined) from.checkpoint = options.checkpoint;
    const create: CreateOptions = { from };
    if (options.name !== undefined) create.name = options.name;
    if (options.labels !== undefined) create.labels = options.labels;
    return Workspace.make(this.client, Workspace.createBody(create), options);
  }

  /** Checkpoints it now (checkpoints.create) and answers a transaction on that checkpoint:
   * disposing of it (`await using`) restores the checkpoint unless `commit()` was called, and
   * waits until a workspace that ran runs again; see CheckpointTransaction. With `memory: true`
   * (a running workspace only) the checkpoint keeps its memory and a rollback resumes its
   * programs as they were instead of booting it.
   *
   *     await using tx = await ws.checkpoint({ name: 'before-upgrade' });
   *     await ws.commands.run('apt-get -y upgrade');
   *     await tx.commit();   // `keep: false`: the checkpoint is deleted here */
  async checkpoint(options: CheckpointScopeOptions = {}): Promise<CheckpointTransaction> {
    const create: CreateCheckpointOptions = callOf(options);
    if (options.name !== undefined) create.name = options.name;
    if (options.memory) create.memory = true;
    const cp = await this.checkpoints.create(create);
    return new CheckpointTransaction(this.checkpoints, cp, options);
  }

  /** Runs `fn` with a checkpoint taken first: if it throws, the checkpoint is restored
   * (`undo: true`: the failed state is kept as a `before_restore` checkpoint; a workspace that
   * ran is waited for until it runs again) and the same error is rethrown. A failed restore
   * never replaces it: it is attached to the error as `rollbackError` (when the error is an
   * object). On success the checkpoint stays unless `keep: false`; `fn`'s value is returned. */
  async withCheckpoint<T>(fn: (checkpoint: Checkpoint) => Promise<T> | T,
                          options: CheckpointScopeOptions = {}): Promise<T> {
    const tx = await this.checkpoint(options);
    let value: T;
    try {
      value = await fn(tx.checkpoint);
    } catch (error) {
      try {
        await tx.rollback();
      } catch (rollbackError) {
        if (typeof error === 'object' && error !== null && Object.isExtensible(error)) {
          Object.defineProperty(error, 'rollbackError',
                                { value: rollbackError, enumerable: true, configurable: true, writable: true });
        }
      }
      throw error;
    }
    await tx.commit();
    return value;
  }

  /** The host of `port`'s preview, `{port}-{name}.{preview domain}[:port]` (no scheme), where
   * a request with a preview token, the tenant's API key, or to a public preview reaches the
   * server on that port. The domain is `previewDomain` / `$BERTH_PREVIEW_DOMAIN` (it may carry
   * a port), else `preview.localhost` on berthd's own port. */
  getHost(port: number): string {
    let domain = this.client.previewDomain;
    if (!/:\d+$/.test(domain)) {
      const api = new URL(this.client.apiUrl);
      if (api.port) domain += `:${api.port}`;
    }
    return `${port}-${this.name}.${domain}`;
  }
}
