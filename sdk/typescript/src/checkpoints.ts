// ws.checkpoints: a workspace's disks, and a running one's memory, kept, compared and brought
// back (docs/api.md, "Checkpoints"), forked into new workspaces ("Forks"), and ws.checkpoint() /
// ws.withCheckpoint(): a checkpoint that rolls the workspace back on failure.

import { randomBytes } from 'node:crypto';
import { ApiClient, CallOptions, wsPath } from './client.js';
import type { Workspace, WorkspaceInfo, WorkspaceState } from './workspace.js';

// Node before 18.18 and 20.4 has no Symbol.asyncDispose. As TypeScript's 5.2 release notes
// recommend, define it when missing, before any class below uses it as a method's key; the
// registered symbol (Symbol.for) is the one other polyfills use, so they agree with this one.
// Where it exists it is read-only and `??=` never writes it.
(Symbol as unknown as { asyncDispose?: symbol }).asyncDispose ??= Symbol.for('Symbol.asyncDispose');

/** A checkpoint as berthd returns it; fields as on the wire. */
export interface Checkpoint {
  /** `cp_…` */
  id: string;
  workspace_id: string;
  /** Unique in the workspace; the id when none was given. */
  name: string;
  /** `before_restore`: the state a restore replaced, kept to undo it. */
  kind: 'manual' | 'before_restore' | 'rolling';
  /** It holds the guest's memory too: a restore resumes its programs instead of booting. */
  memory: boolean;
  /** The checkpoint under this one. */
  parent: string | null;
  /** The workspace's state when it was taken. */
  taken_while: WorkspaceState;
  /** How long the guest was paused to save its memory; null without memory. */
  pause_ms: number | null;
  /** What its layers (and memory) take on the host. */
  size_bytes: number;
  /** Who took it: a key's id, or `system`. */
  created_by: string;
  created_at: string;
}

/** What a restore answers. */
export interface RestoreResult {
  /** The workspace on the checkpoint's disks: `running` again when it ran or the checkpoint
   * has memory, and the restore waited; else as berthd answered (`starting` or `stopped`). */
  workspace: WorkspaceInfo;
  /** The checkpoint of the state the restore replaced (null with `undo: false`). */
  undo: Checkpoint | null;
}

export interface RestoreOptions extends CallOptions {
  /** Checkpoint the state it replaces first, to undo the restore (default true). */
  undo?: boolean;
  /** A workspace that ran is booted again: return once it runs (default true). */
  wait?: boolean;
  /** How long to wait for it to run (default 300 000 ms). */
  waitTimeoutMs?: number;
}

export interface CreateCheckpointOptions extends CallOptions {
  /** Its name (unique in the workspace; default: its id). */
  name?: string;
  /** Also save the running programs' memory, so that a restore resumes them instead of booting
   * (default false): running workspaces only (ConflictError when stopped: it has no memory to
   * checkpoint); the guest pauses briefly (the checkpoint's `pause_ms`). */
  memory?: boolean;
}

export interface CheckpointScopeOptions extends CallOptions {
  /** Its name (unique in the workspace; default: its id). */
  name?: string;
  /** Checkpoint its memory too (a running workspace only): a rollback then resumes its
   * programs as they were instead of booting it (default false). */
  memory?: boolean;
  /** Keep the checkpoint after a success (default true); false deletes it. */
  keep?: boolean;
  /** How long a rollback waits for the workspace to run again (default 300 000 ms). */
  waitTimeoutMs?: number;
}

export interface ForkCheckpointOptions extends CallOptions {
  /** The fork's name; with `count` above 1 the forks are `<name>-1` ... `<name>-<count>`
   * (default: made up, `ws-` and 8 random hex digits). */
  name?: string;
  /** How many forks, 1-16 (default 1). */
  count?: number;
  /** The forks' labels (the rest of their settings are the source's). */
  labels?: Record<string, string>;
  /** Return once every fork runs (default true). */
  wait?: boolean;
  /** How long to wait for them all to run (default 300 000 ms). */
  waitTimeoutMs?: number;
}

/** A file, directory or symlink added, changed or removed (CheckpointDiff.files). */
export interface FileChange {
  /** Absolute, as the guest sees it: `/workspace/app/x.js`. */
  path: string;
  type: 'file' | 'dir' | 'symlink' | 'other';
  /** A file's bytes (the new ones for a change); 0 for the other types, except: */
  size: number;
  /** Only for a directory added or removed whole (one entry): how many entries it held (and
   * `size` their bytes). */
  entries?: number;
}

/** A Debian package (`curl`, `libc6:i386`) installed or removed: its version. */
export interface PackageVersion {
  name: string;
  version: string;
}

/** A Debian package at another version. */
export interface PackageVersionChange {
  name: string;
  from: string;
  to: string;
}

/** What changed from a checkpoint to another, or to the workspace now (checkpoints.diff);
 * fields as on the wire. */
export interface CheckpointDiff {
  /** The first checkpoint's id (`cp_…`). */
  from: string;
  /** The second checkpoint's id, or `current`: the workspace as it is now. */
  to: string;
  /** The trees compared: `/workspace` and the home directory. */
  paths: string[];
  files: {
    /** Each list at most `maxEntries` long. */
    added: FileChange[];
    changed: FileChange[];
    removed: FileChange[];
    /** All of them, also past `maxEntries`. */
    counts: { added: number; changed: number; removed: number };
    /** A list was cut at `maxEntries`, or the guest's walk stopped at its time budget (then the
     * counts too are of what it compared). */
    truncated: boolean;
  };
  packages: {
    installed: PackageVersion[];
    /** At another version. */
    changed: PackageVersionChange[];
    removed: PackageVersion[];
  };
  /** How long the guest took to compare. */
  took_ms: number;
}

export interface DiffOptions extends CallOptions {
  /** The checkpoint to compare with (id or name), or `current`: the workspace now (default). */
  to?: string;
  /** The most entries per list of files, 1-10000 (default: berthd's, 1000). */
  maxEntries?: number;
}

/** What Checkpoints needs of its Workspace (no import cycle at run time). */
export interface CheckpointHost {
  readonly id: string;
  readonly name: string;
  waitFor(state: WorkspaceState, timeoutMs?: number, signal?: AbortSignal): Promise<WorkspaceInfo>;
  /** Records what berthd last said about the workspace. */
  seen(info: WorkspaceInfo): void;
  /** Handles on workspaces berthd just made (forks), on this one's connection settings; with
   * `wait`, each once it runs, all within `waitTimeoutMs`. */
  adopt(infos: WorkspaceInfo[], wait: boolean, waitTimeoutMs?: number, signal?: AbortSignal): Promise<Workspace[]>;
}

// The least time a call that may wait for a boot gets (a restore's stop and start, a diff's
// wake): a boot under TCG on a busy host takes minutes.
const kLongCallMs = 300_000;

function callOf(o: CallOptions): CallOptions {
  const c: CallOptions = {};
  if (o.requestTimeoutMs !== undefined) c.requestTimeoutMs = o.requestTimeoutMs;
  if (o.signal !== undefined) c.signal = o.signal;
  return c;
}

export class Checkpoints {
  constructor(private readonly client: ApiClient, private readonly host: CheckpointHost) {}

  private path(cp?: string, rest = ''): string {
    return wsPath(this.host.id, `/checkpoints${cp === undefined ? '' : `/${encodeURIComponent(cp)}`}${rest}`);
  }

  /** Checkpoints its disks now: running (it keeps running; what its programs wrote is synced
   * first) or stopped; ConflictError when hibernated. With `memory: true`, a running one's
   * memory too (ConflictError when stopped). Never sent twice on its own: berthd takes no
   * Idempotency-Key here, and a second one would be a second checkpoint. */
  create(options: CreateCheckpointOptions = {}): Promise<Checkpoint> {
    const body: Record<string, unknown> = {};
    if (options.name !== undefined) body.name = options.name;
    if (options.memory) body.memory = true;
    return this.client.json<Checkpoint>({ method: 'POST', path: this.path(), json: body, ...callOf(options) });
  }

  /** Its checkpoints, newest first. */
  async list(options: CallOptions = {}): Promise<Checkpoint[]> {
    const answer = await this.client.json<{ checkpoints: Checkpoint[] }>({ method: 'GET', path: this.path(), ...callOf(options) });
    return answer.checkpoints;
  }

  /** A checkpoint by id or name. */
  get(idOrName: string, options: CallOptions = {}): Promise<Checkpoint> {
    return this.client.json<Checkpoint>({ method: 'GET', path: this.path(idOrName), ...callOf(options) });
  }

  /** Deletes a checkpoint (those above it keep what they hold); ConflictError while it is
   * under the disks of the running workspace, or while the workspace is to resume its memory
   * at its next start. */
  delete(idOrName: string, options: CallOptions = {}): Promise<Checkpoint> {
    return this.client.json<Checkpoint>({ method: 'DELETE', path: this.path(idOrName), ...callOf(options) });
  }

  /** Puts its disks back to the checkpoint. With `undo` (default) the state it replaces is
   * checkpointed first (`undo`, kind `before_restore`). A running workspace is stopped,
   * restored and started again. A checkpoint with memory brings back its running programs
   * too: the workspace is `starting`, then `running` with them resumed, not rebooted (the undo
   * of a running one keeps its memory as well). With `wait` (default) this returns once it
   * runs. */
  async restore(idOrName: string, options: RestoreOptions = {}): Promise<RestoreResult> {
    const result = await this.client.json<RestoreResult>({
      method: 'POST', path: this.path(idOrName, '/restore'), json: { undo: options.undo ?? true },
      // berthd answers when the disks are restored, after the stop of a running one.
      requestTimeoutMs: options.requestTimeoutMs ?? Math.max(this.client.requestTimeoutMs, kLongCallMs),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    this.host.seen(result.workspace);
    if (options.wait !== false && (result.workspace.state === 'starting' || result.workspace.state === 'creating')) {
      result.workspace = await this.host.waitFor('running', options.waitTimeoutMs, options.signal);
    }
    return result;
  }

  /** What changed from a checkpoint to another (`to`: its id or name), or to the workspace as
   * it is now (`to: 'current'`, the default): files added, changed and removed under
   * /workspace and the home directory (each list at most `maxEntries` long; `files.counts`
   * counts them all, `files.truncated` says a list was cut), and Debian packages installed,
   * changed and removed. The guest compares the checkpoints' disks, so a stopped or hibernated
   * workspace is started first, as for a command: the call may take a boot and a walk of the
   * file system (default requestTimeoutMs: the connection's, but at least 300 000 ms).
   * NotFoundError for an unknown checkpoint, InvalidArgumentError for `current` as the first
   * one or a `maxEntries` out of range, ConflictError (`failed_precondition`) when the
   * workspace's agent cannot mount the disks. A GET: sent again after a 503 with Retry-After or
   * a lost answer. */
  diff(idOrName: string, options: DiffOptions = {}): Promise<CheckpointDiff> {
    return this.client.json<CheckpointDiff>({
      method: 'GET', path: this.path(idOrName, '/diff'),
      query: { to: options.to ?? 'current', max_entries: options.maxEntries },
      requestTimeoutMs: options.requestTimeoutMs ?? Math.max(this.client.requestTimeoutMs, kLongCallMs),
      ...(options.signal ? { signal: options.signal } : {}),
    });
  }

  /** New workspaces made from a checkpoint (docs/api.md, "Forks"): `count` (1-16) of them, each
   * with its disks as new layers on the checkpoint's (no copy) and a machine of its own
   * (hostname, machine-id, agent token, MAC, ...); from a checkpoint with memory each resumes
   * its programs instead of booting. A fork has the source's image, size, settings, env and
   * network policy; only its name and labels are its own. Answers a Workspace per fork
   * (`lastInfo.forked_from` is the checkpoint's id), by default once each runs. NotFoundError
   * for an unknown checkpoint, ConflictError for one still being taken or a name taken
   * (`already_exists`), RateLimitError (`quota_exceeded`) when the tenant has no room for all
   * of them. While a fork exists, the checkpoint, those under it and this workspace cannot be
   * deleted. Never sent twice on its own: berthd takes no Idempotency-Key here. */
  async fork(idOrName: string, options: ForkCheckpointOptions = {}): Promise<Workspace[]> {
    const body: Record<string, unknown> = { name: options.name ?? `ws-${randomBytes(4).toString('hex')}` };
    if (options.count !== undefined && options.count !== 1) body.count = options.count;
    if (options.labels !== undefined) body.labels = options.labels;
    const answer = await this.client.json<{ workspaces: WorkspaceInfo[] }>({
      method: 'POST', path: this.path(idOrName, '/fork'), json: body, ...callOf(options),
    });
    return this.host.adopt(answer.workspaces, options.wait !== false, options.waitTimeoutMs, options.signal);
  }
}

/**
 * A checkpoint as a transaction (ws.checkpoint()): disposing of it rolls the workspace back to
 * the checkpoint unless commit() was called first, the pattern of a database transaction,
 * since `await using` cannot tell whether its block threw:
 *
 *     await using tx = await ws.checkpoint();
 *     await risky(ws);
 *     await tx.commit();          // not reached on a throw: disposal restores the checkpoint
 *
 * A rollback restores with `undo: true` (the failed state is kept as a `before_restore`
 * checkpoint) and waits until a workspace that ran runs again. If the block threw and the
 * rollback fails too, JavaScript reports both as a SuppressedError (`error`: the rollback's,
 * `suppressed`: the block's); ws.withCheckpoint() rethrows the block's error instead.
 */
export class CheckpointTransaction implements AsyncDisposable {
  private done = false;
  /** The restore's answer, after a rollback. */
  restored: RestoreResult | null = null;

  constructor(private readonly checkpoints: Checkpoints, readonly checkpoint: Checkpoint,
              private readonly options: CheckpointScopeOptions) {}

  /** Whether commit() or rollback() has settled it. */
  get settled(): boolean { return this.done; }

  /** The block succeeded: disposal leaves the disks alone; with `keep: false` the checkpoint
   * is deleted now. */
  async commit(): Promise<void> {
    if (this.done) return;
    this.done = true;
    if (this.options.keep === false) await this.checkpoints.delete(this.checkpoint.id, callOf(this.options));
  }

  /** Restores the checkpoint now (what disposal does without a commit). */
  async rollback(): Promise<RestoreResult> {
    if (this.done && this.restored) return this.restored;
    this.done = true;
    const restore: RestoreOptions = { ...callOf(this.options), undo: true, wait: true };
    if (this.options.waitTimeoutMs !== undefined) restore.waitTimeoutMs = this.options.waitTimeoutMs;
    this.restored = await this.checkpoints.restore(this.checkpoint.id, restore);
    return this.restored;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    if (!this.done) await this.rollback();
  }
}
