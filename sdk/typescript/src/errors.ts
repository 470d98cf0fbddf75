// Typed errors: one class per family of berthd's error codes (docs/api.md, "Conventions"),
// each with the wire `code`, the HTTP `status` and whether trying again later may succeed.

export interface BerthErrorOptions {
  code: string;
  status?: number;
  retryable?: boolean;
  details?: Record<string, unknown>;
  cause?: unknown;
}

/** The base of every error the SDK throws (a caller's own AbortSignal reason excepted). */
export class BerthError extends Error {
  /** berthd's error code (`not_found`, `unavailable`, ...), or the SDK's own. */
  readonly code: string;
  /** The HTTP status, 0 when no answer arrived. */
  readonly status: number;
  /** Whether the same call may succeed later (a waking workspace, a timeout, a dropped link). */
  readonly retryable: boolean;
  /** berthd's `details` object, when the error carries one (quotas). */
  readonly details?: Record<string, unknown>;

  constructor(message: string, options: BerthErrorOptions) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = options.code;
    this.status = options.status ?? 0;
    this.retryable = options.retryable ?? false;
    if (options.details !== undefined) this.details = options.details;
  }
}

/** 400 `invalid_argument` (and the SDK's own checks of arguments); 413 `too_large`. */
export class InvalidArgumentError extends BerthError {}
/** 401 `unauthenticated`: no key, or a wrong or revoked one. */
export class AuthError extends BerthError {}
/** 403 `permission_denied`: the key's scope is too small. */
export class ForbiddenError extends BerthError {}
/** 404 `not_found`: the workspace, file or process does not exist (or is another tenant's). */
export class NotFoundError extends BerthError {}
/** 409 `already_exists` / `failed_precondition`: the name is taken, or the state forbids it. */
export class ConflictError extends BerthError {}
/** 423 `locked`: a person holds the desktop, so the agent's input (and, during a private
 * takeover, its screenshots) is refused until they hand back; not retryable as it is (wait with
 * `desktop.waitRelease()`). berthd's `details` say who and since when. */
export class LockedError extends ConflictError {
  /** `'human'`: who holds the desktop. */
  get holder(): string | null { return this.detail('holder'); }
  /** The key id of the person who took over. */
  get by(): string | null { return this.detail('by'); }
  /** When they took over (RFC 3339). */
  get since(): string | null { return this.detail('since'); }
  get leaseExpires(): string | null { return this.detail('lease_expires'); }
  get reason(): string | null { return this.detail('reason'); }
  /** A private takeover: screenshots are refused too. */
  get private(): boolean { return this.details?.private === true; }

  private detail(key: string): string | null {
    const v = this.details?.[key];
    return typeof v === 'string' ? v : null;
  }
}
/** 429 `resource_exhausted`, `quota_exceeded`, `too_many_connections`. */
export class RateLimitError extends BerthError {}
/** 504 `deadline_exceeded` from berthd, or the call's own deadline passed. */
export class TimeoutError extends BerthError {}
/** 503 `unavailable`, or berthd could not be reached (refused, reset, DNS). */
export class UnavailableError extends BerthError {}
/** 507 `no_space` / `insufficient_storage`. */
export class StorageError extends BerthError {}

type ErrorClass = new (message: string, options: BerthErrorOptions) => BerthError;

// The one table from codes to classes (common/error.h's table, on the client side).
const kByCode: Record<string, ErrorClass> = {
  invalid_argument: InvalidArgumentError,
  too_large: InvalidArgumentError,
  unauthenticated: AuthError,
  permission_denied: ForbiddenError,
  not_found: NotFoundError,
  already_exists: ConflictError,
  failed_precondition: ConflictError,
  locked: LockedError,
  resource_exhausted: RateLimitError,
  quota_exceeded: RateLimitError,
  too_many_connections: RateLimitError,
  deadline_exceeded: TimeoutError,
  unavailable: UnavailableError,
  no_space: StorageError,
  insufficient_storage: StorageError,
};

const kByStatus: Record<number, ErrorClass> = {
  400: InvalidArgumentError, 401: AuthError, 403: ForbiddenError, 404: NotFoundError,
  409: ConflictError, 413: InvalidArgumentError, 423: LockedError, 429: RateLimitError,
  502: UnavailableError, 503: UnavailableError, 504: TimeoutError, 507: StorageError,
};

const kStatusCode: Record<number, string> = {
  400: 'invalid_argument', 401: 'unauthenticated', 403: 'permission_denied', 404: 'not_found',
  409: 'failed_precondition', 413: 'too_large', 423: 'locked', 429: 'resource_exhausted',
  500: 'internal', 502: 'unavailable', 503: 'unavailable', 504: 'deadline_exceeded',
  507: 'insufficient_storage',
};

/** Whether an error of this code may go away by itself. A quota does not: nothing frees itself. */
function isRetryable(code: string): boolean {
  return code === 'unavailable' || code === 'deadline_exceeded' || code === 'resource_exhausted' ||
         code === 'too_many_connections';
}

/** The typed error for berthd's `{error: {code, message, details}}` (or a bare status). */
export function errorFrom(status: number, body: unknown, fallback: string): BerthError {
  let code = '';
  let message = '';
  let details: Record<string, unknown> | undefined;
  if (typeof body === 'object' && body !== null && 'error' in body) {
    const e = (body as { error: unknown }).error;
    if (typeof e === 'object' && e !== null) {
      const o = e as Record<string, unknown>;
      if (typeof o.code === 'string') code = o.code;
      if (typeof o.message === 'string') message = o.message;
      if (typeof o.details === 'object' && o.details !== null) {
        details = o.details as Record<string, unknown>;
      }
    }
  }
  if (!code) code = kStatusCode[status] ?? (status >= 500 ? 'internal' : 'unknown');
  if (!message) message = fallback;
  const Class = kByCode[code] ?? kByStatus[status] ?? BerthError;
  const options: BerthErrorOptions = { code, status, retryable: isRetryable(code) };
  if (details) options.details = details;
  return new Class(`${message} (${code}, HTTP ${status})`, options);
}

/** The result of a command; also carried by CommandExitError. */
export interface CommandResult {
  exitCode: number;
  stdout: string;
  stderr: string;
  /** The signal that ended it ("KILL", "TERM"), when one did. */
  signal: string | null;
  /** The agent killed it because it ran past `timeoutMs`. */
  timedOut: boolean;
  /** Set when the command did not exit 0 (E2B's field): a one-line reason. */
  error?: string;
}

/** A command exited non-zero (thrown unless `check: false`); the result is on it. */
export class CommandExitError extends BerthError implements CommandResult {
  readonly result: CommandResult;
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
  readonly signal: string | null;
  readonly timedOut: boolean;
  readonly error: string;

  constructor(result: CommandResult) {
    const why = result.error ?? `exited with code ${result.exitCode}`;
    const tail = result.stderr.trim().split('\n').slice(-3).join('\n');
    super(`command ${why}${tail ? `: ${tail}` : ''}`, { code: 'command_failed' });
    this.result = result;
    this.exitCode = result.exitCode;
    this.stdout = result.stdout;
    this.stderr = result.stderr;
    this.signal = result.signal;
    this.timedOut = result.timedOut;
    this.error = why;
  }
}
