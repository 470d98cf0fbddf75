// Templates: a tenant's checkpoints with memory published under a name, or built by berthd from
// a setup script (docs/api.md, "Templates"). A workspace made from one
// (`Workspace.create({ template })`) is a fork of that checkpoint, resumed with the template's
// programs already running instead of a cold boot.

import { ApiClient, CallOptions, ConnectionOptions } from './client.js';
import { BerthError, InvalidArgumentError, TimeoutError } from './errors.js';
import { toSeconds, type Duration, type ForkSource } from './workspace.js';

export type TemplateState = 'building' | 'ready' | 'failed';

/** A template as berthd returns it; fields as on the wire. */
export interface Template {
  /** `tpl_…` */
  id: string;
  /** Unique in the tenant. */
  name: string;
  /** The workspace and checkpoint (with memory) it is; a build's checkpoint is `""` until it is
   * ready. */
  workspace_id: string;
  checkpoint_id: string;
  /** While its workspace is there: that workspace's name, and what a workspace made from the
   * template is (image, cpus, memory_mib, disk_gib); absent once it is gone. */
  workspace?: string;
  image?: string;
  cpus?: number;
  memory_mib?: number;
  disk_gib?: number;
  /** Who published it: a key's id. */
  created_by: string;
  created_at: string;
  /** `ready` for one published from a checkpoint; a build's is `building`, then `ready` or
   * `failed` (with `error`). A berthd from before builds sends none: ready. */
  state: TemplateState;
  /** Why its build failed. */
  error?: string;
  /** A build's request. */
  script?: string;
  start?: string;
  ready?: string;
  timeout_s?: number;
  /** The last 16 KiB of a build's output (Templates.get and wait only). */
  build_log?: string;
}

interface CreateTemplateBase extends ConnectionOptions, CallOptions {
  /** Its name (lowercase letters, digits, `-`; unique in the tenant; at most 48 characters for
   * a build, whose workspace is `template-<name>`). */
  name: string;
}

/** A template published from a checkpoint with memory. */
export interface CreateTemplateFromOptions extends CreateTemplateBase {
  /** The workspace it is made from and its checkpoint, which must have memory; without a
   * checkpoint, one with memory named `template-<name>` is taken of the workspace now (it must
   * be running or hibernated). */
  from: ForkSource;
  script?: never;
}

/** A template berthd builds: a workspace of its own runs `script`, then `start`, until `ready`. */
export interface CreateTemplateScriptOptions extends CreateTemplateBase {
  from?: never;
  /** Run with `bash -e` as the workspace's user, in their home (at most 64 KiB). */
  script: string;
  /** Started in the background once the script is done (a dev server, a database; tag
   * `template-start`). */
  start?: string;
  /** Run every second until it exits 0 (`curl -sf http://127.0.0.1:3000/`). */
  ready?: string;
  /** `base` (default) or `desktop`. */
  image?: string;
  /** `small` (default), `medium` or `large`. */
  size?: string;
  /** The build's limit, all of it (berthd's `timeout_s`, 10 s to 2 h; default 30 min): seconds
   * or "30m". */
  buildTimeout?: Duration;
  /** Return only once the build ended (default true): the template `ready`, or a
   * TemplateBuildError if it failed. `false`: berthd's answer, `building`, at once. */
  wait?: boolean;
  /** How long to wait for the build (default: buildTimeout + 5 min). */
  waitTimeoutMs?: number;
}

export type CreateTemplateOptions = CreateTemplateFromOptions | CreateTemplateScriptOptions;

export interface WaitTemplateOptions extends ConnectionOptions, CallOptions {
  /** How long to wait (default: the template's timeout_s + 5 min from now; berthd ends every
   * build within its timeout_s). */
  timeoutMs?: number;
}

/** A template's build ended `failed`: `template` as berthd answered it, `error` berthd's reason
 * ("the script exited with 3"), `buildLog` the end of the build's output; the message has the
 * error and the log's last lines. Not retryable as it is: fix the script, delete the template
 * and build it again. */
export class TemplateBuildError extends BerthError {
  /** How much of the log's end goes into the message (all of it is on `buildLog`). */
  static readonly kMessageLogChars = 2000;
  readonly template: Template;
  readonly error: string;
  readonly buildLog: string;

  constructor(template: Template) {
    const error = template.error ?? 'no reason given';
    const log = template.build_log ?? '';
    let tail = log.replace(/\n+$/, '');
    if (tail.length > TemplateBuildError.kMessageLogChars) {
      tail = tail.slice(-TemplateBuildError.kMessageLogChars);
      const nl = tail.indexOf('\n');
      tail = `…${nl >= 0 ? tail.slice(nl + 1) : tail}`;
    }
    super(`template '${template.name}' failed to build: ${error}${tail ? `\n--- the end of its build log ---\n${tail}` : ''}`,
          { code: 'template_build_failed' });
    this.template = template;
    this.error = error;
    this.buildLog = log;
  }
}

/** berthd's limit on a build without timeout_s, and what a wait allows beyond it: berthd then
 * still checkpoints the built workspace's memory (a few GiB written) and records the end. */
const kDefaultBuildTimeoutS = 1800;
const kBuildGraceMs = 300_000;
/** Polling GET /v1/templates/{tpl} while a build runs: the first pause, doubled up to the last
 * (a build boots a workspace and runs a script: seconds at best, usually minutes). */
export const kBuildPollFirstMs = 500;
export const kBuildPollMaxMs = 5_000;

type TemplateCallOptions = ConnectionOptions & CallOptions;

function callOf(o: CallOptions): CallOptions {
  const c: CallOptions = {};
  if (o.requestTimeoutMs !== undefined) c.requestTimeoutMs = o.requestTimeoutMs;
  if (o.signal !== undefined) c.signal = o.signal;
  return c;
}

function path(nameOrId?: string): string {
  return `/v1/templates${nameOrId === undefined ? '' : `/${encodeURIComponent(nameOrId)}`}`;
}

function invalid(message: string): InvalidArgumentError {
  return new InvalidArgumentError(message, { code: 'invalid_argument' });
}

/** POST /v1/templates's body: one form or the other, never both nor neither (berthd would answer
 * a 400; the SDK says which option is wrong, before sending anything). */
function createBody(o: CreateTemplateOptions): Record<string, unknown> {
  // Either form's fields, to tell a caller (from JavaScript, or with a cast) who gave both.
  const loose = o as Omit<Partial<CreateTemplateScriptOptions>, 'from'> & { from?: ForkSource };
  if (loose.from !== undefined && loose.script !== undefined) {
    throw invalid('give either from (a template of a checkpoint) or script (a template berthd builds), not both');
  }
  if (loose.script !== undefined) {
    const body: Record<string, unknown> = { name: o.name, script: loose.script };
    if (loose.start !== undefined) body.start = loose.start;
    if (loose.ready !== undefined) body.ready = loose.ready;
    if (loose.image !== undefined) body.image = loose.image;
    if (loose.size !== undefined) body.size = loose.size;
    if (loose.buildTimeout !== undefined) body.timeout_s = toSeconds(loose.buildTimeout);
    return body;
  }
  if (loose.from === undefined) {
    throw invalid('give from ({ workspace, checkpoint? }: a template of its checkpoint with memory) or script ' +
                  '(a template berthd builds by running it in a new workspace)');
  }
  const extra = (['start', 'ready', 'image', 'size', 'buildTimeout'] as const).filter((k) => loose[k] !== undefined);
  if (extra.length) throw invalid(`${extra.join(', ')} go with script, not with from`);
  const { workspace, checkpoint } = loose.from;
  const from: Record<string, string> = { workspace: typeof workspace === 'string' ? workspace : workspace.id };
  if (checkpoint !== undefined) from.checkpoint = checkpoint;
  return { name: o.name, from };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The template once it is not `building` (GET, which carries the build_log, every 0.5 s and then
 * less often: no event tells a build's end), or TemplateBuildError if it failed. `deadline`: a
 * Date.now() by which it gives up with TimeoutError; each GET waits at most until then. */
async function settle(client: ApiClient, t: Template, nameOrId: string, deadline: number,
                      signal?: AbortSignal): Promise<Template> {
  for (let pause = kBuildPollFirstMs; t.state === 'building'; pause = Math.min(pause * 2, kBuildPollMaxMs)) {
    if (Date.now() + pause + 100 > deadline) {
      throw new TimeoutError(`template '${t.name}' is still building; berthd goes on with the build: wait for it ` +
                             `again, or delete its workspace (template-${t.name}) to end it`,
                             { code: 'deadline_exceeded', retryable: true });
    }
    await sleep(pause, signal);
    const call: CallOptions = { requestTimeoutMs: Math.max(1, Math.min(client.requestTimeoutMs, deadline - Date.now())) };
    if (signal) call.signal = signal;
    t = await client.json<Template>({ method: 'GET', path: path(t.id || nameOrId), ...call });
  }
  if (t.state === 'failed') throw new TemplateBuildError(t);
  return t;
}

/** The tenant's templates. Each call connects as Workspace.create does (`apiUrl`, `apiKey`, or
 * `$BERTH_URL`, `$BERTH_API_KEY`); a template is named by its name or its id. */
export class Templates {
  private constructor() {}

  /**
   * Makes a template, in one of two ways (both or neither is an InvalidArgumentError, nothing
   * sent).
   *
   * `from`: publishes a checkpoint with memory; ready at once. ConflictError for a checkpoint
   * without memory (`failed_precondition`, "has no memory"), NotFoundError for an unknown
   * workspace or checkpoint. While the template exists its checkpoint and workspace cannot be
   * deleted.
   *
   * `script`: berthd builds it in a workspace of its own (`template-<name>`, of `image` and
   * `size`): the script, then `start` in the background, then `ready` until it exits 0, then a
   * checkpoint of its memory, all within `buildTimeout`. berthd answers `building` at once; unless
   * `wait: false`, this returns once the template is `ready`, and throws TemplateBuildError (the
   * build's error and the end of its log) if it failed, TimeoutError after `waitTimeoutMs` (the
   * build going on).
   *
   * ConflictError (`already_exists`) for a name taken, a failed build's too (delete it first).
   * Never sent twice on its own: berthd takes no Idempotency-Key here.
   */
  static async create(options: CreateTemplateOptions): Promise<Template> {
    const body = createBody(options);
    const client = new ApiClient(options);
    const t = await client.json<Template>({ method: 'POST', path: path(), json: body, ...callOf(options) });
    const scripted = options.script !== undefined ? options : undefined;
    if (!scripted || scripted.wait === false || t.state !== 'building') return t;
    const waitMs = scripted.waitTimeoutMs ??
      ((typeof body.timeout_s === 'number' ? body.timeout_s : kDefaultBuildTimeoutS) * 1000 + kBuildGraceMs);
    return settle(client, t, options.name, Date.now() + waitMs, options.signal);
  }

  /** Waits for a template's build to end: the template once it is `ready` (at once for one that
   * is not building), TemplateBuildError if it failed (`error`, `buildLog`; its message has both),
   * TimeoutError after `timeoutMs` (the build going on). Asks berthd every half second, then less
   * often (at most every 5 s). */
  static async wait(nameOrId: string, options: WaitTemplateOptions = {}): Promise<Template> {
    const client = new ApiClient(options);
    const started = Date.now();
    const first = await client.json<Template>({ method: 'GET', path: path(nameOrId), ...callOf(options) });
    const deadline = options.timeoutMs !== undefined ? started + options.timeoutMs
      : Date.now() + (first.timeout_s ?? kDefaultBuildTimeoutS) * 1000 + kBuildGraceMs;
    return settle(client, first, nameOrId, deadline, options.signal);
  }

  /** The tenant's templates, by name. */
  static async list(options: TemplateCallOptions = {}): Promise<Template[]> {
    const answer = await new ApiClient(options).json<{ templates: Template[] }>({
      method: 'GET', path: path(), ...callOf(options),
    });
    return answer.templates;
  }

  /** A template by name or id (NotFoundError if there is none); a built one's with the end of its
   * build's output (`build_log`). */
  static get(nameOrId: string, options: TemplateCallOptions = {}): Promise<Template> {
    return new ApiClient(options).json<Template>({ method: 'GET', path: path(nameOrId), ...callOf(options) });
  }

  /** Deletes a template and answers it as it was; workspaces made from it go on. One berthd built:
   * its workspace goes too, unless forks stand on its checkpoint; ConflictError while it is being
   * built (delete its workspace `template-<name>` to end the build). */
  static delete(nameOrId: string, options: TemplateCallOptions = {}): Promise<Template> {
    return new ApiClient(options).json<Template>({ method: 'DELETE', path: path(nameOrId), ...callOf(options) });
  }
}
