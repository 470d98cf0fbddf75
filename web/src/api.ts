// The v1 API as the page uses it: same origin, the session cookie, and the CSRF token (kept in
// memory only) on every request that is not a GET or HEAD. Errors carry berthd's own message.

export interface ApiErrorBody {
  error?: { code?: string; message?: string; details?: Record<string, unknown> };
}

export class ApiError extends Error {
  /** berthd's `details`, when the error carries them (a 423's holder, by and since). */
  constructor(message: string, readonly status: number, readonly code: string, readonly details?: Record<string, unknown>) {
    super(message);
  }
}

export interface Session {
  id: string;
  tenant: { id: string; name: string };
  key: { id: string; prefix: string; scope: string };
  created_at: string;
  expires_at: string;
  csrf_token: string;
}

export interface Awake {
  reasons: string[];
  idle_at: string | null;
}

export interface Workspace {
  id: string;
  name: string;
  tenant: string;
  image: string;
  image_version?: string;
  size: string;
  cpus: number;
  memory_mib: number;
  disk_gib: number;
  idle_timeout: number;
  idle_action: string;
  max_runtime: number | null;
  auto_start: boolean;
  env: Record<string, string>;
  labels: Record<string, string>;
  state: string;
  error: string | null;
  created_at: string;
  updated_at: string;
  started_at: string | null;
  last_active_at: string | null;
  awake?: Awake | null;
  /** The checkpoint this workspace was forked from (null when it is not a fork). */
  forked_from?: string | null;
}

/** A checkpoint (docs/api.md, "Checkpoints"; common/v1/checkpoint.h). */
export interface Checkpoint {
  id: string;
  workspace_id: string;
  name: string;  // its id when it was taken without one
  kind: 'manual' | 'before_restore' | 'rolling' | string;
  memory: boolean;
  parent: string | null;
  taken_while: string;
  pause_ms: number | null;
  size_bytes: number;
  created_by: string;
  created_at: string;
}

/** POST …/checkpoints/{cp}/restore's answer: the workspace, and the checkpoint of the state it
 * left (null when the restore was asked with "undo": false). */
export interface Restored {
  workspace: Workspace;
  undo: Checkpoint | null;
}

/** A file, directory or link added, changed or removed since a checkpoint. A directory added or
 * removed whole is one entry: `entries` counts what it holds and `size` their bytes. */
export interface FileChange {
  path: string;  // absolute, as the guest sees it
  type: 'file' | 'dir' | 'symlink' | 'other' | string;
  size: number;  // a file's bytes (the new one's for a change)
  entries?: number;
}

/** GET …/checkpoints/{cp}/diff's answer (common/protocol/diff.h): what changed between the
 * checkpoint and `to` (another checkpoint, or "current": the workspace as it is now). */
export interface CheckpointDiff {
  from: string;
  to: string;
  paths: string[];  // the trees compared: "/workspace", "/home/agent"
  files: {
    added: FileChange[];
    changed: FileChange[];
    removed: FileChange[];
    counts: { added: number; changed: number; removed: number };  // all of them, also past the lists
    /** A list was cut at max_entries, or the guest's walk stopped at its time budget (then the
     * counts too are of what it compared). */
    truncated: boolean;
  };
  packages: {
    installed: { name: string; version: string }[];
    changed: { name: string; from: string; to: string }[];
    removed: { name: string; version: string }[];
  };
  took_ms: number;
}

/** What changed since checkpoint `cp` of `ws`, up to `to` ("current", or another checkpoint's
 * id), at most `maxEntries` files a list. A stopped or hibernated workspace is started first
 * (the guest compares), so it can take a while. */
export async function diffCheckpoint(ws: string, cp: string, to: string, maxEntries: number,
                                     signal?: AbortSignal): Promise<CheckpointDiff> {
  const q = new URLSearchParams({ to, max_entries: String(maxEntries) });
  return call<CheckpointDiff>('GET', checkpointPath(ws, cp, `/diff?${q}`), { signal });
}

/** A template (docs/api.md, "Templates"; common/v1/template.h). What a workspace made from it is
 * (workspace, image, cpus, memory_mib, disk_gib) is there while its workspace is. */
export interface Template {
  id: string;
  name: string;
  workspace_id: string;
  checkpoint_id: string;
  workspace?: string;
  image?: string;
  cpus?: number;
  memory_mib?: number;
  disk_gib?: number;
  created_by: string;
  created_at: string;
  /** A template built by berthd from a script is `building` until it is `ready` (or `failed`,
   * with `error`); absent, it is ready. */
  state?: string;
  error?: string | null;
  /** A build's request (POST /v1/templates {name, script, start?, ready?, image?, size?,
   * timeout_s?}). */
  script?: string;
  start?: string;
  ready?: string;
  timeout_s?: number;
  /** The last 16 KiB of a build's output: GET /v1/templates/{tpl} only. */
  build_log?: string;
}

let csrfToken: string | null = null;
let session: Session | null = null;
// Called when berthd says the session is gone (401), so the app can show the sign-in form.
let onSignedOut: () => void = () => {};

/** The signed-in session (null when signed out); its CSRF token goes on every change. */
export function setSession(s: Session | null): void {
  session = s;
  csrfToken = s?.csrf_token ?? null;
}

export function currentSession(): Session | null {
  return session;
}

export function onUnauthenticated(handler: () => void): void {
  onSignedOut = handler;
}

export function csrfHeaders(method: string): Record<string, string> {
  const m = method.toUpperCase();
  return m === 'GET' || m === 'HEAD' || !csrfToken ? {} : { 'X-CSRF-Token': csrfToken };
}

/** What a failed answer means, in berthd's words when it gave them. */
export function errorFromText(status: number, statusText: string, text: string): ApiError {
  try {
    const body = JSON.parse(text) as ApiErrorBody;
    if (body.error?.message) return new ApiError(body.error.message, status, body.error.code ?? 'unknown', body.error.details);
  } catch {
    // Not JSON: a proxy's page or an empty body.
  }
  const snippet = text.trim().replace(/\s+/g, ' ').slice(0, 200);
  const what = snippet && !snippet.startsWith('<') ? `: ${snippet}` : '';
  return new ApiError(`berthd answered ${status} ${statusText}${what}`.trim(), status, 'unknown');
}

export function networkError(e: unknown): ApiError {
  const why = e instanceof Error ? e.message : String(e);
  return new ApiError(`Could not reach berthd (${why}). Check the connection and try again.`, 0, 'unavailable');
}

export interface CallOptions {
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Do not treat a 401 as "signed out" (the sign-in call itself). */
  quiet401?: boolean;
}

export async function call<T>(method: string, path: string, options: CallOptions = {}): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json', ...csrfHeaders(method), ...options.headers };
  let body: BodyInit | undefined;
  if (options.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(options.body);
  }
  let r: Response;
  try {
    r = await fetch(path, { method, headers, body, credentials: 'same-origin', signal: options.signal });
  } catch (e) {
    if (e instanceof DOMException && e.name === 'AbortError') throw e;
    throw networkError(e);
  }
  const text = await r.text();
  if (!r.ok) {
    const err = errorFromText(r.status, r.statusText, text);
    if (r.status === 401 && !options.quiet401) onSignedOut();
    throw err;
  }
  return (text ? JSON.parse(text) : undefined) as T;
}

export function wsPath(ws: string, rest = ''): string {
  return `/v1/workspaces/${encodeURIComponent(ws)}${rest}`;
}

/** A checkpoint's route: …/checkpoints/{cp}{rest}. */
export function checkpointPath(ws: string, cp: string, rest = ''): string {
  return wsPath(ws, `/checkpoints/${encodeURIComponent(cp)}${rest}`);
}

/** Whether a workspace can be made from the template now. */
export function templateReady(t: Template): boolean {
  return (t.state ?? 'ready') === 'ready';
}

/** The tenant's templates, by name. */
export async function listTemplates(signal?: AbortSignal): Promise<Template[]> {
  return (await call<{ templates: Template[] }>('GET', '/v1/templates', { signal })).templates;
}

/** One template (by name or id), with a build's `build_log`. */
export async function getTemplate(nameOrId: string, signal?: AbortSignal): Promise<Template> {
  return call<Template>('GET', `/v1/templates/${encodeURIComponent(nameOrId)}`, { signal });
}

/** The files route of an absolute guest path. */
export function filePath(ws: string, path: string): string {
  return wsPath(ws, '/files' + path.split('/').map(encodeURIComponent).join('/'));
}

export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}
