// ws.desktop (docs/api.md, "Desktop"): the agent's eyes and hands on the workspace's screen
// (screenshot, act and its shortcuts), the guest's clipboard, who controls the desktop's input,
// viewer tickets, and the DevTools endpoint of its Chrome. Actions are checked here as berthd's parser
// (controller/desktop/rfb_input.cc) checks them, with its limits, so a batch berthd would refuse
// is refused before anything is sent; only the screen's bounds are left to berthd (it alone
// knows the screen's size).

import { ApiClient, CallOptions, wrapError, wsPath } from './client.js';
import { BerthError, ConflictError, InvalidArgumentError, TimeoutError } from './errors.js';

// berthd's limits (controller/desktop/rfb_input.h, agent_hands.h).
export const kMaxActions = 200;
export const kMaxTypedText = 10_000;   // characters typed per batch
export const kMaxPauseMs = 10_000;     // one wait or hold_key
export const kMaxPausesMs = 30_000;    // all of a batch's
const kMaxDragPoints = 100;
const kMaxNotches = 50;
const kMaxKeysLength = 64;
const kMinScale = 0.05;
/** The most text the guest's clipboard takes or gives, in bytes of UTF-8 (controller/desktop/clipboard.h). */
export const kMaxClipboard = 1 << 20;
// A UTF-16 surrogate without its pair: not Unicode, and not JSON berthd would take.
const kLoneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export interface Size { width: number; height: number }

/** The screen at one moment: `data` is the image (`format`), `image` its size, `screen` the
 * screen's. Actions take the screen's coordinates: `toScreen` maps a scaled image's back. */
export class Screenshot {
  constructor(readonly data: Uint8Array, readonly format: 'png' | 'jpeg', readonly screen: Size,
              readonly image: Size) {}

  get mimeType(): string { return this.format === 'jpeg' ? 'image/jpeg' : 'image/png'; }
  get scaled(): boolean { return this.image.width !== this.screen.width || this.image.height !== this.screen.height; }

  /** The screen's pixel under the image's pixel (x, y): the centre of the screen's box that the
   * image's pixel averages (berthd scales by boxes), inside the screen. */
  toScreen(x: number, y: number): { x: number; y: number } {
    const sx = Math.floor((x + 0.5) * this.screen.width / Math.max(1, this.image.width));
    const sy = Math.floor((y + 0.5) * this.screen.height / Math.max(1, this.image.height));
    return { x: Math.min(Math.max(sx, 0), this.screen.width - 1), y: Math.min(Math.max(sy, 0), this.screen.height - 1) };
  }
}

export interface ScreenshotOptions extends CallOptions {
  /** `png` (default, exact) or `jpeg` (smaller). */
  format?: 'png' | 'jpeg';
  /** 0.05-1 (default 1): the image's size as a share of the screen's. */
  scale?: number;
  /** JPEG quality 1-100 (berthd's default 80). */
  quality?: number;
}

export type MouseButton = 'left' | 'middle' | 'right';
export type Point = [number, number];

/** Computer-use actions, as berthd takes them (docs/api.md, "Desktop"); x and y are the screen's
 * pixels. An action without x and y acts where an earlier action of the same batch left the
 * pointer. */
export type DesktopAction =
  | { type: 'move'; x: number; y: number }
  | { type: 'click'; x?: number; y?: number; button?: MouseButton; count?: 1 | 2 | 3 }
  | { type: 'mouse_down' | 'mouse_up'; x?: number; y?: number; button?: MouseButton }
  | { type: 'drag'; path: Point[]; button?: MouseButton }
  | { type: 'drag'; from: Point; to: Point; button?: MouseButton }
  /** Wheel notches: dy > 0 down, dx > 0 right (each -50..50). */
  | { type: 'scroll'; x?: number; y?: number; dx?: number; dy?: number }
  /** Printable ASCII, newline and tab (the guest's en-us map). */
  | { type: 'type'; text: string }
  /** "Return", "ctrl+c", "ctrl+shift+t", "alt+F4". */
  | { type: 'key'; keys: string }
  | { type: 'hold_key'; keys: string; ms: number }
  | { type: 'wait'; ms: number };

/** What a batch did: `done` actions on a screen of `screen`'s size. */
export interface ActionsResult {
  done: number;
  screen: Size;
}

const kModifiers = new Set(['ctrl', 'control', 'shift', 'alt', 'option', 'meta', 'super', 'win', 'cmd', 'command']);
const kNamedKeys = new Set([
  'enter', 'return', 'tab', 'esc', 'escape', 'backspace', 'delete', 'del', 'insert', 'home', 'end', 'pageup',
  'page_up', 'pagedown', 'page_down', 'left', 'up', 'right', 'down', 'arrowleft', 'arrowup', 'arrowright',
  'arrowdown', 'space', 'capslock', 'menu', 'print', 'printscreen',
]);

function invalid(message: string): InvalidArgumentError {
  return new InvalidArgumentError(message, { code: 'invalid_argument' });
}

function namedKey(name: string): boolean {
  if (Buffer.byteLength(name) === 1) return name.charCodeAt(0) >= 0x20 && name.charCodeAt(0) <= 0x7e;
  const lower = name.toLowerCase();
  if (kNamedKeys.has(lower) || kModifiers.has(lower)) return true;
  return /^f[0-9]{1,2}$/.test(lower) && Number(lower.slice(1)) >= 1 && Number(lower.slice(1)) <= 12;
}

/** Why berthd would refuse a key combination ("ctrl+shift+t"), or undefined. */
export function checkKeys(keys: string): string | undefined {
  const bytes = Buffer.byteLength(keys);
  if (bytes < 1 || bytes > kMaxKeysLength) return `'keys' is 1 to ${kMaxKeysLength} characters`;
  let rest: string;
  let last: string;
  if (keys === '+') {
    [rest, last] = ['', '+'];
  } else if (keys.length >= 2 && keys.endsWith('++')) {
    [rest, last] = [keys.slice(0, -2), '+'];
  } else {
    const plus = keys.lastIndexOf('+');
    [rest, last] = plus < 0 ? ['', keys] : [keys.slice(0, plus), keys.slice(plus + 1)];
  }
  if (rest) {
    for (const part of rest.split('+')) {
      if (!kModifiers.has(part.toLowerCase())) {
        return `'${part.toLowerCase()}' in '${keys}' is not a modifier (ctrl, shift, alt, meta)`;
      }
    }
  }
  if (!namedKey(last)) return `unknown key '${last}' in '${keys}'`;
  return undefined;
}

/** berthd's checks of a batch (rfb_input.cc, Compiler::Add), without the screen. */
class Checker {
  private hasPosition = false;
  private typed = 0;
  private paused = 0;

  add(index: number, action: unknown): void {
    const bad = (what: string) => invalid(`action ${index}: ${what}`);
    if (typeof action !== 'object' || action === null || Array.isArray(action) ||
        typeof (action as { type?: unknown }).type !== 'string') {
      throw bad('an action is an object with a "type"');
    }
    const a = action as Record<string, unknown>;
    const has = (k: string) => Object.prototype.hasOwnProperty.call(a, k) && a[k] !== undefined;
    const point = (x: unknown, y: unknown) => {
      if (!Number.isSafeInteger(x) || !Number.isSafeInteger(y)) throw bad('x and y are whole pixels');
      if ((x as number) < 0 || (y as number) < 0 || (x as number) > 0xffff || (y as number) > 0xffff) {
        throw bad(`(${String(x)}, ${String(y)}) is off the screen`);
      }
    };
    const maybeMove = (required = false) => {
      if (!has('x') && !has('y') && !required) return;
      if (!has('x') || !has('y')) throw bad('needs both x and y');
      point(a.x, a.y);
      this.hasPosition = true;
    };
    const needPosition = () => {
      if (!this.hasPosition) throw bad('the pointer has no position yet: give x and y');
    };
    const pair = (p: unknown) => {
      if (!Array.isArray(p) || p.length !== 2) throw bad('a point is [x, y]');
      point(p[0], p[1]);
    };
    const pause = () => {
      const ms = a.ms;
      if (!Number.isSafeInteger(ms) || (ms as number) < 0 || (ms as number) > kMaxPauseMs) {
        throw bad(`'ms' is 0 to ${kMaxPauseMs}`);
      }
      this.paused += ms as number;
      if (this.paused > kMaxPausesMs) throw bad(`a request pauses at most ${kMaxPausesMs} ms in all`);
    };
    if (has('button') && a.button !== 'left' && a.button !== 'middle' && a.button !== 'right') {
      throw bad("'button' is left, middle or right");
    }
    switch (a.type) {
      case 'move':
        maybeMove(true);
        break;
      case 'click':
        if (has('count') && !(a.count === 1 || a.count === 2 || a.count === 3)) throw bad("'count' is 1, 2 or 3");
        maybeMove();
        needPosition();
        break;
      case 'mouse_down':
      case 'mouse_up':
        maybeMove();
        needPosition();
        break;
      case 'drag':
        if (has('path')) {
          if (!Array.isArray(a.path) || a.path.length < 2 || a.path.length > kMaxDragPoints) {
            throw bad(`'path' is 2 to ${kMaxDragPoints} points [x, y]`);
          }
          for (const p of a.path) pair(p);
        } else {
          if (!has('from') || !has('to')) throw bad("a drag needs 'path', or 'from' and 'to'");
          pair(a.from);
          pair(a.to);
        }
        this.hasPosition = true;
        break;
      case 'scroll':
        maybeMove();
        needPosition();
        for (const axis of ['dy', 'dx']) {
          if (has(axis) && (!Number.isSafeInteger(a[axis]) || Math.abs(a[axis] as number) > kMaxNotches)) {
            throw bad(`'${axis}' is a whole number of notches, -${kMaxNotches} to ${kMaxNotches}`);
          }
        }
        break;
      case 'type': {
        if (typeof a.text !== 'string') throw bad("'text' is a string");
        this.typed += Buffer.byteLength(a.text);
        if (this.typed > kMaxTypedText) throw bad(`at most ${kMaxTypedText} characters are typed per request`);
        let i = 0;
        for (const c of a.text) {
          const cp = c.codePointAt(0) ?? 0;
          if (c !== '\n' && c !== '\t' && (cp < 0x20 || cp > 0x7e)) {
            throw bad(`character U+${cp.toString(16).toUpperCase().padStart(4, '0')} (at ${i}) is not on the guest's ` +
                      "keyboard map (en-us: printable ASCII, newline and tab); put it on the clipboard with " +
                      "setClipboard(text) and press key 'ctrl+v'");
          }
          i += c.length;
        }
        break;
      }
      case 'key':
      case 'hold_key': {
        if (typeof a.keys !== 'string') throw bad('\'keys\' is a string, e.g. "ctrl+c"');
        const why = checkKeys(a.keys);
        if (why) throw bad(why);
        if (a.type === 'hold_key') pause();
        break;
      }
      case 'wait':
        pause();
        break;
      default:
        throw bad(`unknown type '${String(a.type)}' (move, click, mouse_down, mouse_up, drag, scroll, type, key, ` +
                  'hold_key, wait)');
    }
  }
}

/** Checks a batch as berthd would (InvalidArgumentError naming the action by its index for
 * anything it would refuse, but a point off the screen) and returns the request's body. */
export function checkActions(actions: DesktopAction | readonly DesktopAction[]): { actions: DesktopAction[] } {
  const list = Array.isArray(actions) ? [...(actions as readonly DesktopAction[])] : [actions as DesktopAction];
  if (list.length < 1 || list.length > kMaxActions) {
    throw invalid(`'actions' is a list of 1 to ${kMaxActions} actions (not ${list.length})`);
  }
  const checker = new Checker();
  list.forEach((a, i) => checker.add(i, a));
  return { actions: list };
}

/** Checks the clipboard's text as berthd would (a string of at most 1 MiB of UTF-8:
 * InvalidArgumentError, nothing sent) and returns the request's body. */
export function checkClipboardText(text: unknown): { text: string } {
  if (typeof text !== 'string') {
    throw invalid(`the clipboard's text is a string, not ${text === null ? 'null' : typeof text}`);
  }
  const lone = text.search(kLoneSurrogate);
  if (lone >= 0) throw invalid(`the clipboard's text is not valid Unicode (a lone surrogate at ${lone})`);
  const bytes = Buffer.byteLength(text);
  if (bytes > kMaxClipboard) {
    throw new InvalidArgumentError(`the clipboard takes at most ${kMaxClipboard} bytes of UTF-8, not ${bytes}`,
                                   { code: 'too_large' });
  }
  return { text };
}

/** How long berthd holds one `?wait=change` at most (ms) in waitForControlChange: between
 * two, the SDK reads the workspace's state (berthd ends a wait early when the workspace stops;
 * one begun on a stopped workspace runs its course). */
export const kControlWaitStepMs = 20_000;
/** The states in which a desktop's control may still change. */
const kLiveStates = ['creating', 'starting', 'running'];

/** waitForControlChange's options. */
export interface WaitForControlChangeOptions extends CallOptions {
  /** The revision you have (a DesktopControl's); undefined or null: the current one, read first. */
  revision?: number | null;
  /** How long to wait for a change (any length; default 60 000); then the unchanged state. */
  timeoutMs?: number;
  /** How long berthd holds each wait (whole seconds, at least 1 000; default kControlWaitStepMs). */
  stepMs?: number;
}

/** The control state; fields as on the wire. */
export interface DesktopControl {
  holder: 'agent' | 'human';
  since: string | null;
  /** The key id of the person, or of whoever handed back. */
  by: string | null;
  lease_expires: string | null;
  reason: string | null;
  /** The agent may not read the screen while a person holds it. */
  private: boolean;
  /** The agent's open request for a person, else null. */
  request?: { reason: string; since: string; by: string | null; taken: boolean; [key: string]: unknown } | null;
  /** The last hand-back, else null. */
  handback?: {
    note: string | null; by: string | null; cause?: string; at?: string; request?: string | null;
    tabs_before: Array<{ url: string; title: string }> | null; tabs_after: Array<{ url: string; title: string }> | null;
    [key: string]: unknown;
  } | null;
  /** requestHuman's answer only: whether a person took over and handed back in time. */
  answered?: boolean;
  /** requestHuman's answer only: the web UI's desktop page, to send the person to. */
  url?: string;
  /** Changes with every takeover, hand-back, help request and withdrawal (not with a lease's
   * renewal) and never repeats within a berthd's life: waitForControlChange({ revision }). */
  revision: number;
}

/** A one-time ticket for one browser viewer, valid 60 s; `url` is the WebSocket's address. */
export interface DesktopTicket {
  ticket: string;
  mode: 'view' | 'control';
  expires_at: string;
  url: string;
}

export class Desktop {
  constructor(private readonly client: ApiClient, private readonly ws: string) {}

  /** The screen now: PNG (or JPEG) bytes with the screen's and the image's sizes. LockedError
   * during a private takeover. */
  async screenshot(options: ScreenshotOptions = {}): Promise<Screenshot> {
    const { format = 'png', scale = 1, quality, ...call } = options;
    if (format !== 'png' && format !== 'jpeg') throw invalid(`format is png or jpeg, not '${String(format)}'`);
    if (typeof scale !== 'number' || !(scale >= kMinScale && scale <= 1)) {
      throw invalid(`scale is a number from ${kMinScale} to 1, not ${String(scale)}`);
    }
    if (quality !== undefined && !(Number.isSafeInteger(quality) && quality >= 1 && quality <= 100)) {
      throw invalid(`quality is 1 to 100, not ${String(quality)}`);
    }
    const what = `GET ${wsPath(this.ws, '/desktop/screenshot')}`;
    const { response, deadline } = await this.client.request({
      method: 'GET', path: wsPath(this.ws, '/desktop/screenshot'), streamResponse: true,
      query: { format, scale: scale === 1 ? undefined : scale, quality }, ...call,
    });
    try {
      const data = new Uint8Array(await response.arrayBuffer());
      const size = (name: string): number => {
        const v = response.headers.get(name) ?? '';
        if (!/^[0-9]+$/.test(v)) throw new BerthError(`${what}: the answer has no ${name} header`, { code: 'internal' });
        return Number(v);
      };
      const type = response.headers.get('content-type') ?? '';
      return new Screenshot(data, type.includes('jpeg') ? 'jpeg' : 'png',
                            { width: size('x-screen-width'), height: size('x-screen-height') },
                            { width: size('x-image-width'), height: size('x-image-height') });
    } catch (e) {
      throw wrapError(e, deadline, `${what}: reading the image`);
    } finally {
      deadline.done();
    }
  }

  /** Runs a batch of actions (1-200) in order as one request: a bad one anywhere sends nothing
   * (checked here first, with berthd's limits). Never sent twice on its own. LockedError (423)
   * while a person holds control. requestTimeoutMs default 120 s (a batch may pause 30 s). */
  async act(actions: DesktopAction | readonly DesktopAction[], options: CallOptions = {}): Promise<ActionsResult> {
    const body = checkActions(actions);
    return this.client.json<ActionsResult>({
      method: 'POST', path: wsPath(this.ws, '/desktop/actions'), json: body,
      requestTimeoutMs: Math.max(120_000, this.client.requestTimeoutMs), ...options,
    });
  }

  /** The pointer to (x, y), the screen's pixels. */
  move(x: number, y: number, options: CallOptions = {}): Promise<ActionsResult> {
    return this.act({ type: 'move', x, y }, options);
  }

  /** A click at (x, y); `count` 2 is a double click, 3 a triple one. */
  click(x: number, y: number, options: CallOptions & { button?: MouseButton; count?: 1 | 2 | 3 } = {}): Promise<ActionsResult> {
    const { button = 'left', count = 1, ...call } = options;
    return this.act({ type: 'click', x, y, button, count }, call);
  }

  /** Types text: printable ASCII, newline and tab (at most 10 000 characters); for any other
   * text, `setClipboard(text)` and then `key('ctrl+v')`. */
  type(text: string, options: CallOptions = {}): Promise<ActionsResult> {
    return this.act({ type: 'type', text }, options);
  }

  /** Presses a key or a combination: "Return", "ctrl+c", "ctrl+shift+t", "alt+F4". */
  key(keys: string, options: CallOptions = {}): Promise<ActionsResult> {
    return this.act({ type: 'key', keys }, options);
  }

  /** Wheel notches at (x, y): dy > 0 down, dx > 0 right (each -50..50). */
  scroll(x: number, y: number, options: CallOptions & { dx?: number; dy?: number } = {}): Promise<ActionsResult> {
    const { dx = 0, dy = 0, ...call } = options;
    return this.act({ type: 'scroll', x, y, dx, dy }, call);
  }

  /** Presses at `from`, moves to `to`, releases (a `drag` action takes a path of 100 points). */
  drag(from: Point, to: Point, options: CallOptions & { button?: MouseButton } = {}): Promise<ActionsResult> {
    const { button = 'left', ...call } = options;
    return this.act({ type: 'drag', path: [from, to], button }, call);
  }

  /** The text on the guest's clipboard ('' when it holds none; at most 1 MiB). LockedError
   * during someone else's private takeover (the person may have copied a password; its holder
   * still reads it), ConflictError when the
   * image has no desktop clipboard, UnavailableError while its display is not up. */
  async clipboard(options: CallOptions = {}): Promise<string> {
    const path = wsPath(this.ws, '/desktop/clipboard');
    const answer = await this.client.json<{ text?: unknown }>({ method: 'GET', path, ...options });
    if (typeof answer.text !== 'string') throw new BerthError(`GET ${path}: the answer has no 'text'`, { code: 'internal' });
    return answer.text;
  }

  /** Puts `text` (any Unicode, at most 1 MiB of UTF-8: InvalidArgumentError before anything is
   * sent) on the guest's clipboard and resolves to its size in bytes; then `key('ctrl+v')`
   * pastes it where typing reaches only ASCII. LockedError while a person holds control (but
   * for their own key). */
  async setClipboard(text: string, options: CallOptions = {}): Promise<number> {
    const body = checkClipboardText(text);
    const path = wsPath(this.ws, '/desktop/clipboard');
    const answer = await this.client.json<{ bytes?: unknown }>({ method: 'PUT', path, json: body, ...options });
    if (!Number.isSafeInteger(answer.bytes)) throw new BerthError(`PUT ${path}: the answer has no 'bytes'`, { code: 'internal' });
    return answer.bytes as number;
  }

  /**
   * The DevTools endpoint of the workspace's Chrome through berthd,
   * `<apiUrl>/v1/workspaces/{id}/desktop/cdp`. It takes the API key as a bearer token:
   * `chromium.connectOverCDP(ws.desktop.cdpUrl(), { headers: { Authorization: 'Bearer <key>' } })`.
   */
  cdpUrl(): string {
    return this.client.url(wsPath(this.ws, '/desktop/cdp'));
  }

  /** Who holds control now. */
  control(options: CallOptions = {}): Promise<DesktopControl> {
    return this.client.json<DesktopControl>({ method: 'GET', path: wsPath(this.ws, '/desktop/control'), ...options });
  }

  /** Waits (at most `timeoutMs`, 1 h at most; default 60 s) until the agent holds control
   * again, without polling; read `holder` to see which came first. */
  waitRelease(options: CallOptions & { timeoutMs?: number } = {}): Promise<DesktopControl> {
    const { timeoutMs = 60_000, ...call } = options;
    if (!(timeoutMs > 0 && timeoutMs <= 3_600_000)) {
      throw new InvalidArgumentError('timeoutMs is at most 1 hour', { code: 'invalid_argument' });
    }
    return this.client.json<DesktopControl>({
      method: 'GET', path: wsPath(this.ws, '/desktop/control'),
      query: { wait: 'release', timeout: `${Math.max(1, Math.round(timeoutMs / 1000))}s` },
      requestTimeoutMs: timeoutMs + 30_000, ...call,
    });
  }

  /** Waits (at most `timeoutMs`, default 60 s; berthd holds each wait, no polling) until the
   * control state's `revision` is not `revision` (undefined: the current one): a takeover,
   * hand-back, help request or withdrawal, not a lease's renewal. Resolves to the state then,
   * or at the timeout (compare its `revision`). berthd holds each wait at most `stepMs` and
   * the SDK asks again until `timeoutMs`; between two it reads the workspace: ConflictError
   * (`failed_precondition`) once it is not running (stopping, stopped, hibernated, error),
   * NotFoundError once deleted. `requestTimeoutMs` bounds the whole call (default
   * `timeoutMs` + 30 s; TimeoutError if it runs out first). */
  async waitForControlChange(options: WaitForControlChangeOptions = {}): Promise<DesktopControl> {
    const { revision, timeoutMs = 60_000, stepMs = kControlWaitStepMs, requestTimeoutMs, signal } = options;
    if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs < 0) {
      throw new InvalidArgumentError(`timeoutMs is a number of milliseconds, not ${String(timeoutMs)}`, { code: 'invalid_argument' });
    }
    if (revision !== undefined && revision !== null && !(Number.isSafeInteger(revision) && revision >= 0)) {
      throw new InvalidArgumentError(`revision is a DesktopControl's revision (an integer >= 0), not ${String(revision)}`,
                                     { code: 'invalid_argument' });
    }
    if (typeof stepMs !== 'number' || !(stepMs >= 1000 && stepMs <= 3_600_000)) {
      throw new InvalidArgumentError('stepMs is 1 000 to 3 600 000', { code: 'invalid_argument' });
    }
    const total = requestTimeoutMs ?? timeoutMs + 30_000;
    const end = Date.now() + timeoutMs;
    const deadline = Date.now() + total;
    // Each request gets what is left of the whole call's deadline.
    const call = (): CallOptions => ({ requestTimeoutMs: Math.max(1, deadline - Date.now()), ...(signal ? { signal } : {}) });
    const path = wsPath(this.ws, '/desktop/control');
    let seen = revision ?? null;
    if (seen === null) seen = (await this.control(call())).revision;
    const what = `wait for a change of the desktop control of ${this.ws} (revision ${seen})`;
    for (;;) {
      const budget = Math.min(end - Date.now(), deadline - Date.now() - 1000);  // a second for the answer
      const seconds = Math.max(0, Math.min(Math.floor(stepMs / 1000), Math.floor(budget / 1000)));
      const state: DesktopControl = await this.client.json<DesktopControl>({
        method: 'GET', path, query: { wait: 'change', revision: seen, timeout: `${seconds}s` }, ...call(),
      });
      if (typeof state?.revision !== 'number') {
        throw new BerthError(`${what}: the answer has no 'revision' (a berthd without ?wait=change)`, { code: 'internal', status: 200 });
      }
      if (state.revision !== seen) return state;
      // No change within berthd's wait: is there still a desktop to change?
      const info = await this.client.json<{ name: string; state: string; error?: string | null }>({
        method: 'GET', path: wsPath(this.ws), ...call(),
      });
      if (!kLiveStates.includes(info.state)) {
        throw new ConflictError(`${what}: workspace ${info.name} is ${info.state}${info.error ? ` (${info.error})` : ''}`,
                                { code: 'failed_precondition', status: 409 });
      }
      if (end - Date.now() < 1000) return state;  // the caller's timeout: the state, unchanged
      if (seconds === 0 || deadline - Date.now() <= 1000) {
        throw new TimeoutError(`${what}: requestTimeoutMs (${total} ms) ran out before timeoutMs (${timeoutMs} ms)`,
                               { code: 'deadline_exceeded', retryable: true });
      }
    }
  }

  /** A person takes control (a lease renewed by their input); `private`: the agent may not
   * read the screen meanwhile; `leaseMs`: a lease of their own, shorter than the operator's
   * (15 min), in whole seconds. ConflictError while someone else holds it. */
  takeOver(options: CallOptions & { private?: boolean; reason?: string; leaseMs?: number } = {}): Promise<DesktopControl> {
    const { private: isPrivate, reason, leaseMs, ...call } = options;
    const body: Record<string, unknown> = { private: isPrivate ?? false };
    if (reason !== undefined) body.reason = reason;
    if (leaseMs !== undefined) body.lease_s = Math.max(1, Math.round(leaseMs / 1000));
    return this.client.json<DesktopControl>({
      method: 'POST', path: wsPath(this.ws, '/desktop/control/takeover'), json: body, ...call,
    });
  }

  /** Hands control back to the agent. */
  release(options: CallOptions & { note?: string } = {}): Promise<DesktopControl> {
    const { note, ...call } = options;
    return this.client.json<DesktopControl>({
      method: 'POST', path: wsPath(this.ws, '/desktop/control/release'), json: note === undefined ? {} : { note }, ...call,
    });
  }

  /** Asks a person to take over (the desktop page shows `reason`) and waits (at most
   * `timeoutMs`, default 10 min, 1 h at most; `null`: answers at once) until one took over and
   * handed back: `answered`, `url` (the desktop page) and, when answered, `handback` (note,
   * by, tabs_before, tabs_after). A request nobody took is withdrawn at the timeout.
   * requestTimeoutMs default: timeoutMs + 30 s. */
  requestHuman(reason: string, options: CallOptions & { timeoutMs?: number | null } = {}): Promise<DesktopControl> {
    const { timeoutMs = 600_000, ...call } = options;
    if (typeof reason !== 'string') throw new InvalidArgumentError('reason is a string', { code: 'invalid_argument' });
    const body: Record<string, unknown> = { reason };
    if (timeoutMs !== null) {
      if (!(timeoutMs > 0 && timeoutMs <= 3_600_000)) {
        throw new InvalidArgumentError('timeoutMs is at most 1 hour', { code: 'invalid_argument' });
      }
      body.timeout_s = Math.max(1, Math.round(timeoutMs / 1000));
    }
    return this.client.json<DesktopControl>({
      method: 'POST', path: wsPath(this.ws, '/desktop/control/request'), json: body,
      ...(timeoutMs !== null ? { requestTimeoutMs: timeoutMs + 30_000 } : {}), ...call,
    });
  }

  /** Withdraws a request for a person that nobody has taken yet. */
  withdrawRequest(options: CallOptions = {}): Promise<DesktopControl> {
    return this.client.json<DesktopControl>({
      method: 'DELETE', path: wsPath(this.ws, '/desktop/control/request'), ...options,
    });
  }

  /** A one-time ticket that opens one viewer (noVNC) within 60 s. */
  ticket(mode: 'view' | 'control' = 'view', options: CallOptions = {}): Promise<DesktopTicket> {
    if (mode !== 'view' && mode !== 'control') {
      throw new InvalidArgumentError(`a ticket's mode is view or control, not '${String(mode)}'`, { code: 'invalid_argument' });
    }
    return this.client.json<DesktopTicket>({
      method: 'POST', path: wsPath(this.ws, '/desktop/tickets'), json: { mode }, ...options,
    });
  }
}
