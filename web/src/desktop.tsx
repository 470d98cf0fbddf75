// The desktop: the workspace's screen through noVNC on berthd's RFB WebSocket (GET
// …/desktop/vnc?ticket=…), and who controls its input (GET/POST …/desktop/control…). Shared by
// the Desktop tab (a signed-in session: it asks for a fresh single-use ticket for each
// connection) and the standalone page of a shared link (desktop.html#ws=…&ticket=…: one
// ticket, one connection, the control routes through X-Berth-Desktop-Ticket).
//
// berthd drops the input of any viewer that does not hold control, whatever the page does; the
// page only mirrors that: view-only noVNC while watching, and a `control` ticket's viewer (a
// new connection) once this person has taken over.
import RFB from '@novnc/novnc/lib/rfb';
import { useEffect, useRef, useState } from 'preact/hooks';
import { call, currentSession, errorFromText, errorMessage, networkError, wsPath } from './api';
import { CopyDialog, PasteDialog } from './desktop_clipboard';
import { ErrorNote, copyText, formatDuration, formatTime, useNow } from './ui';

export type Mode = 'view' | 'control';

export interface ControlState {
  holder: 'agent' | 'human';
  since: string | null;
  by: string | null;
  lease_expires: string | null;
  reason: string | null;
  private: boolean;
  /** Changes with every takeover, hand-back and help request (the page is served by the same berthd). */
  revision: number;
  /** The agent asking a person for help (request_human); absent from older berthds. */
  request?: { reason?: string | null; since?: string | null; by?: string | null; taken?: unknown } | null;
}

interface Ticket {
  ticket: string;
  mode: Mode;
  expires_at: string;
  url: string;
}

/** How a page reaches the desktop's routes: a signed-in session, or a shared link's ticket. */
export interface DesktopAccess {
  kind: 'session' | 'link';
  ws: string;
  /** The viewer's WebSocket address for `mode`, or null when this page can open no more. */
  openViewer(mode: Mode): Promise<string | null>;
  /** The control state now (`seen` null), or once it is no longer the state of revision `seen`. */
  getControl(seen: number | null, signal?: AbortSignal): Promise<ControlState>;
  takeover(isPrivate: boolean): Promise<ControlState>;
  release(note: string): Promise<ControlState>;
  /** Puts text on the guest's clipboard (PUT …/desktop/clipboard): the bytes put there. */
  setClipboard(text: string): Promise<number>;
  /** The guest's clipboard's text (GET …/desktop/clipboard), or null where this page may not
   * read it: a shared link's ticket opens the paste only. */
  getClipboard: (() => Promise<string>) | null;
  /** Why a viewer could not connect, in berthd's words, when it can tell (null: a passing failure). */
  diagnose(): Promise<string | null>;
  /** The key this page acts as, when known before a takeover. */
  me: string | null;
  /** A link's ticket fixes the mode; a session picks it. */
  fixedMode: Mode | null;
}

function socketUrl(ws: string, ticket: string): string {
  const scheme = window.location.protocol === 'https:' ? 'wss' : 'ws';
  return `${scheme}://${window.location.host}${wsPath(ws, '/desktop/vnc')}?ticket=${encodeURIComponent(ticket)}`;
}

// ?wait=change answers at the latest after this, with a fresh lease expiry.
const kWaitTimeout = '60s';
// berthd's control state pushed: read now, or wait (long-poll) for a change from `seen`.
function controlPath(seen: number | null): string {
  return `/desktop/control${seen === null ? '' : `?wait=change&revision=${seen}&timeout=${kWaitTimeout}`}`;
}

export function sessionAccess(ws: string): DesktopAccess {
  return {
    kind: 'session',
    ws,
    me: currentSession()?.key.id ?? null,
    fixedMode: null,
    async openViewer(mode) {
      const t = await call<Ticket>('POST', wsPath(ws, '/desktop/tickets'), { body: { mode } });
      return socketUrl(ws, t.ticket);
    },
    getControl: (seen, signal) => call<ControlState>('GET', wsPath(ws, controlPath(seen)), { signal }),
    takeover: (isPrivate) => call<ControlState>('POST', wsPath(ws, '/desktop/control/takeover'), { body: { private: isPrivate } }),
    release: (note) => call<ControlState>('POST', wsPath(ws, '/desktop/control/release'), { body: note ? { note } : {} }),
    setClipboard: async (text) => (await call<{ bytes: number }>('PUT', wsPath(ws, '/desktop/clipboard'), { body: { text } })).bytes,
    getClipboard: async () => (await call<{ text: string }>('GET', wsPath(ws, '/desktop/clipboard'))).text,
    async diagnose() {
      // The screenshot route reaches the same socket and says why it cannot.
      try {
        const r = await fetch(`${wsPath(ws, '/desktop/screenshot')}?format=jpeg&scale=0.05`, { credentials: 'same-origin' });
        if (r.ok || r.status === 423) return null;
        const err = errorFromText(r.status, r.statusText, await r.text());
        if (r.status === 503 || r.status === 404 || r.status === 409 || r.status === 501) return err.message;
        return null;
      } catch {
        return null;
      }
    },
  };
}

/** A shared link's access: its one ticket opens one viewer, and the control routes while open. */
export function linkAccess(ws: string, ticket: string, mode: Mode): DesktopAccess {
  let used = false;
  const send = async <T,>(method: string, rest: string, body?: unknown, signal?: AbortSignal): Promise<T> => {
    let r: Response;
    try {
      r = await fetch(wsPath(ws, rest), {
        method, credentials: 'omit', signal,
        headers: { Accept: 'application/json', 'X-Berth-Desktop-Ticket': ticket, ...(body ? { 'Content-Type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
    } catch (e) {
      if (e instanceof DOMException && e.name === 'AbortError') throw e;
      throw networkError(e);
    }
    const text = await r.text();
    if (!r.ok) throw errorFromText(r.status, r.statusText, text);
    return JSON.parse(text) as T;
  };
  return {
    kind: 'link',
    ws,
    me: null,
    fixedMode: mode,
    async openViewer() {
      if (used) return null;
      used = true;
      return socketUrl(ws, ticket);
    },
    getControl: (seen, signal) => send<ControlState>('GET', controlPath(seen), undefined, signal),
    takeover: (isPrivate) => send<ControlState>('POST', '/desktop/control/takeover', { private: isPrivate }),
    release: (note) => send<ControlState>('POST', '/desktop/control/release', note ? { note } : {}),
    setClipboard: async (text) => (await send<{ bytes: number }>('PUT', '/desktop/clipboard', { text })).bytes,
    // A control link reads it too (berthd refuses a view link's ticket); the button shows only
    // while the page holds control.
    getClipboard: mode === 'control' ? async () => (await send<{ text: string }>('GET', '/desktop/clipboard')).text : null,
    diagnose: async () => null,
  };
}

type Conn =
  | { kind: 'idle' }
  | { kind: 'connecting'; mode: Mode }
  | { kind: 'connected'; mode: Mode }
  | { kind: 'reconnecting'; attempt: number; at: number }
  | { kind: 'failed'; text: string }
  | { kind: 'ended'; text: string };

/** A time: the clock alone when it is today's. */
function when(iso: string | null): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toDateString() === new Date().toDateString() ? d.toLocaleTimeString() : formatTime(iso);
}

function backoffMs(attempt: number): number {
  return Math.min(1000 * 2 ** Math.min(attempt - 1, 4), 15_000);
}

/**
 * The screen, the control bar and the help banner. `running` false: no connection is made
 * (the caller says why and offers Start); `visible` false: none either, unless this person
 * holds control.
 */
export function DesktopView({ access, running, visible = true }: { access: DesktopAccess; running: boolean; visible?: boolean }) {
  const host = useRef<HTMLDivElement>(null);
  const rfbRef = useRef<RFB | null>(null);
  const [conn, setConn] = useState<Conn>({ kind: 'idle' });
  const [screen, setScreen] = useState<{ w: number; h: number } | null>(null);
  const [control, setControl] = useState<ControlState | null>(null);
  const [controlError, setControlError] = useState<string | null>(null);
  const [actionError, setActionError] = useState<string | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const [note, setNote] = useState('');
  const [me, setMe] = useState<string | null>(access.me);
  const [retryNonce, setRetryNonce] = useState(0);
  const [controlNonce, setControlNonce] = useState(0);
  const [clip, setClip] = useState<'paste' | 'copy' | null>(null);
  const [pasted, setPasted] = useState<number | null>(null);
  const now = useNow();

  const mine = !!control && control.holder === 'human' && !!me && control.by === me;
  const mode: Mode = access.fixedMode ?? (mine ? 'control' : 'view');
  const viewOnly = !(mode === 'control' && mine);
  const connected = conn.kind === 'connected';
  // Connected while shown, and while this person holds control even when another tab is shown
  // (berthd hands control back once the last control viewer has been gone for its grace).
  const live = running && (visible || mine);
  // A link's ticket opens the control routes only while its viewer is open.
  const canAct = !!control && (access.kind === 'session' || connected);

  // One viewer at a time: a fresh ticket for each connection, again (with back-off) when it drops.
  useEffect(() => {
    if (!live) {
      setConn({ kind: 'idle' });
      return;
    }
    let disposed = false;
    let attempt = 0;
    let timer = 0;
    let rfb: RFB | null = null;
    let sizeWatch: MutationObserver | null = null;
    let everOpened = false;  // once the screen was there, a failure is a passing one (a reboot)
    const retry = () => {
      attempt += 1;
      setConn({ kind: 'reconnecting', attempt, at: Date.now() + backoffMs(attempt) });
      timer = window.setTimeout(connect, backoffMs(attempt));
    };
    const connect = async () => {
      if (disposed) return;
      setConn({ kind: 'connecting', mode });
      let url: string | null;
      try {
        url = await access.openViewer(mode);
      } catch (e) {
        if (disposed) return;
        const status = (e as { status?: number }).status ?? 0;
        if (status === 401) return;  // signed out: the app shows the sign-in form
        if (status >= 400 && status < 500 && status !== 429) {
          setConn({ kind: 'failed', text: errorMessage(e) });
          return;
        }
        retry();
        return;
      }
      if (disposed) return;
      if (url === null) {
        setConn({ kind: 'ended', text: 'The connection has ended. A shared link opens the desktop once: ask for a new link.' });
        return;
      }
      let opened = false;
      const r = new RFB(host.current!, url, { wsProtocols: ['binary'], shared: true });
      rfb = r;
      rfbRef.current = r;
      r.scaleViewport = true;
      r.resizeSession = false;
      r.viewOnly = true;
      r.background = '#1b1f24';
      r.addEventListener('connect', () => {
        opened = true;
        everOpened = true;
        attempt = 0;
        setConn({ kind: 'connected', mode });
        setControlNonce((n) => n + 1);  // a link's control routes open with its viewer
        const canvas = host.current?.querySelector('canvas');
        if (canvas) {
          const read = () => setScreen(canvas.width > 0 ? { w: canvas.width, h: canvas.height } : null);
          read();
          sizeWatch = new MutationObserver(read);
          sizeWatch.observe(canvas, { attributes: true, attributeFilter: ['width', 'height'] });
        }
      });
      r.addEventListener('disconnect', () => {
        sizeWatch?.disconnect();
        sizeWatch = null;
        if (rfbRef.current === r) rfbRef.current = null;
        rfb = null;
        if (disposed) return;
        if (access.kind === 'link') {
          setConn(opened
            ? { kind: 'ended', text: 'The connection has ended. A shared link opens the desktop once: ask for a new link.' }
            : { kind: 'failed', text: 'The desktop could not be opened with this link: it may have been used already or have expired (a link must be opened within 60 s of being made), or the workspace has no screen.' });
          return;
        }
        if (opened || everOpened) {
          retry();
          return;
        }
        void access.diagnose().then((why) => {
          if (disposed) return;
          if (why) setConn({ kind: 'failed', text: `The desktop is not available: berthd says “${why}”. A workspace has a screen when its image has a desktop (the “desktop” image).` });
          else retry();
        });
      });
      r.addEventListener('securityfailure', () => !disposed && setConn({ kind: 'failed', text: 'The screen refused the connection (RFB security).' }));
    };
    void connect();
    return () => {
      disposed = true;
      window.clearTimeout(timer);
      sizeWatch?.disconnect();
      if (rfb) {
        const old = rfb;
        rfb = null;
        if (rfbRef.current === old) rfbRef.current = null;
        try { old.disconnect(); } catch { /* already closed */ }
      }
      setScreen(null);
    };
  }, [access, live, mode, retryNonce]);

  useEffect(() => {
    const r = rfbRef.current;
    if (r) r.viewOnly = viewOnly;
  }, [viewOnly, conn]);

  // Who controls, pushed: read now, then wait on berthd (?wait=change) for the next change from
  // the revision shown; berthd answers at the change, or after kWaitTimeout with a fresh lease.
  useEffect(() => {
    if (!running) return;
    if (access.kind === 'link' && !connected) return;  // the ticket opens these routes only while its viewer is open
    const abort = new AbortController();
    let timer = 0;
    let failures = 0;
    const loop = async (seen: number | null) => {
      if (abort.signal.aborted) return;
      try {
        const s = await access.getControl(seen, abort.signal);
        if (abort.signal.aborted) return;
        failures = 0;
        setControl(s);
        setControlError(null);
        void loop(s.revision);
      } catch (e) {
        if (abort.signal.aborted) return;
        const status = (e as { status?: number }).status;
        if (status === 401 && access.kind === 'session') return;
        failures += 1;
        setControlError(`Who holds control is not known: ${errorMessage(e)}`);
        timer = window.setTimeout(() => void loop(null), backoffMs(failures));
      }
    };
    void loop(null);
    return () => {
      abort.abort();
      window.clearTimeout(timer);
    };
  }, [access, running, connected, controlNonce]);

  const act = async (what: 'takeover' | 'private' | 'release') => {
    setBusy(what);
    setActionError(null);
    try {
      const s = what === 'release' ? await access.release(note.trim()) : await access.takeover(what === 'private');
      if (what !== 'release' && s.by) setMe(s.by);
      if (what === 'release') setNote('');
      setControl(s);
      setControlNonce((n) => n + 1);
    } catch (e) {
      const verb = what === 'release' ? 'Handing back' : 'Taking over';
      setActionError(`${verb} failed: ${errorMessage(e)}`);
    } finally {
      setBusy(null);
    }
  };

  useEffect(() => {
    if (visible && !viewOnly && connected) rfbRef.current?.focus({ preventScroll: true });
  }, [visible, viewOnly, connected]);

  // The clipboard is the holder's: its dialogs and note go with control.
  useEffect(() => {
    if (mine) return;
    setClip(null);
    setPasted(null);
  }, [mine]);
  const sentToClipboard = (bytes: number) => {
    setClip(null);
    setPasted(bytes);
    // Ctrl+V goes to the VM from here.
    window.setTimeout(() => rfbRef.current?.focus({ preventScroll: true }), 0);
  };

  const request = control?.request ?? null;
  const lease = control?.lease_expires ? Date.parse(control.lease_expires) : NaN;
  const holderText = !control ? 'Checking who holds control…'
    : control.holder === 'agent'
      ? `The agent has control${control.since ? ` (handed back ${when(control.since)})` : ''}.`
      : `${mine ? 'Since' : `A person (${control.by ?? 'unknown key'}) has had control since`} ${when(control.since)}${control.private ? ', privately: the agent cannot see the screen' : ''}.${Number.isFinite(lease) ? ` The lease ends at ${when(control.lease_expires)} (in ${formatDuration((lease - now) / 1000)}) and is renewed by ${mine ? 'your' : 'their'} input.` : ''}`;
  const connText = conn.kind === 'connected' ? (screen ? `connected, ${screen.w}×${screen.h}` : 'connected')
    : conn.kind === 'connecting' ? (conn.mode === 'control' ? 'connecting to take control…' : 'connecting…')
    : conn.kind === 'reconnecting' ? `connection lost; reconnecting in ${Math.max(0, Math.ceil((conn.at - now) / 1000))} s (attempt ${conn.attempt})…`
    : conn.kind === 'idle' ? 'not connected' : conn.kind === 'ended' ? 'ended' : 'failed';

  return (
    <div class={`desktop ${mine ? 'in-control' : 'watching'}`} data-holder={control?.holder ?? ''} data-mode={mode}>
      {request && (
        <div class="help-request" role="alert">
          <p><strong>The agent asks for help:</strong> <span class="help-reason">{request.reason ?? ''}</span>
            {request.since && <span class="muted"> (since {when(request.since)})</span>}
            {!!request.taken && control?.holder === 'human' && <span class="muted"> A person has taken over.</span>}</p>
          {!mine && <button type="button" disabled={!!busy || !canAct} onClick={() => void act('takeover')}>Take over</button>}
        </div>
      )}
      <div class="desk-bar" hidden={conn.kind === 'failed'}>
        <p class={`desk-who ${mine ? 'mine' : ''}`} role="status">
          <strong>{mine ? 'You have control' : 'You are watching'}</strong>
          <span class="desk-holder">{holderText}</span>
        </p>
        <div class="buttons">
          {mine && (
            <>
              <button type="button" class="quiet" disabled={!canAct} onClick={() => { setPasted(null); setClip('paste'); }}
                      title="Put text on the VM's clipboard, then paste it there with Ctrl+V">Paste into VM</button>
              {access.getClipboard && (
                <button type="button" class="quiet" disabled={!canAct} onClick={() => setClip('copy')}
                        title="Read the VM's clipboard and copy it to this computer">Copy from VM</button>
              )}
            </>
          )}
          {mine ? (
            <form class="inline" onSubmit={(e) => { e.preventDefault(); void act('release'); }}>
              <label class="desk-note-field">Note for the agent (optional)
                <input value={note} maxLength={2000} onInput={(e) => setNote((e.currentTarget as HTMLInputElement).value)}
                       placeholder="e.g. signed in; carry on" />
              </label>
              <button type="submit" disabled={!!busy || !canAct}>{busy === 'release' ? 'Handing back…' : 'Hand back'}</button>
            </form>
          ) : (
            <>
              <button type="button" disabled={!!busy || !canAct} onClick={() => void act('takeover')}>
                {busy === 'takeover' ? 'Taking over…' : 'Take over'}</button>
              <button type="button" class="quiet" disabled={!!busy || !canAct} onClick={() => void act('private')}
                      title="For typing a password: the agent cannot see the screen until you hand back">
                {busy === 'private' ? 'Taking over…' : 'Take over privately'}</button>
            </>
          )}
        </div>
      </div>
      {access.fixedMode === 'view' && <p class="muted desk-note">This link is view-only: it cannot take control.</p>}
      {mine && pasted !== null && (
        <p class="note desk-pasted" role="status">Your text ({pasted.toLocaleString()} bytes) is on the VM's clipboard: press Ctrl+V in the VM to paste it.
          <button type="button" class="link" onClick={() => setPasted(null)}>Dismiss</button></p>
      )}
      <PasteDialog open={mine && clip === 'paste'} onClose={() => setClip(null)} send={access.setClipboard} onSent={sentToClipboard} />
      {access.getClipboard && <CopyDialog open={mine && clip === 'copy'} onClose={() => setClip(null)} read={access.getClipboard} />}
      {actionError && <ErrorNote message={actionError} onDismiss={() => setActionError(null)} />}
      {controlError && <ErrorNote message={controlError} />}
      {(conn.kind === 'failed' || conn.kind === 'ended') && (
        <div class={conn.kind === 'failed' ? 'error' : 'note'} role="alert">
          <span>{conn.text}</span>
          {access.kind === 'session' && <button type="button" class="quiet" onClick={() => setRetryNonce((n) => n + 1)}>Try again</button>}
        </div>
      )}
      <div class="desk-frame" hidden={conn.kind === 'failed'}>
        <div class="desk-head">
          <span class={`desk-conn ${conn.kind}`}>Screen: {connText}</span>
          {!viewOnly && <span class="desk-live">your keyboard and mouse reach the workspace</span>}
        </div>
        <div class="desk-screen" ref={host} role="region" aria-label="The workspace's screen"
             style={screen ? { aspectRatio: `${screen.w} / ${screen.h}` } : undefined} />
      </div>
      {access.kind === 'session' && conn.kind !== 'failed' && <ShareLink ws={access.ws} />}
    </div>
  );
}

/** Making a link for someone without a session: a ticket in the fragment of desktop.html. */
export function ShareLink({ ws }: { ws: string }) {
  const [link, setLink] = useState<{ url: string; mode: Mode; expires: string } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [copied, setCopied] = useState<string | null>(null);
  const field = useRef<HTMLInputElement>(null);
  const make = async (mode: Mode) => {
    setError(null);
    setCopied(null);
    try {
      const t = await call<Ticket>('POST', wsPath(ws, '/desktop/tickets'), { body: { mode } });
      const url = `${window.location.origin}/desktop.html#ws=${encodeURIComponent(ws)}&ticket=${encodeURIComponent(t.ticket)}&mode=${t.mode}`;
      setLink({ url, mode: t.mode, expires: t.expires_at });
    } catch (e) {
      setError(errorMessage(e));
    }
  };
  return (
    <details class="desk-share">
      <summary>Share this desktop</summary>
      <p class="muted">A link opens the desktop once, for whoever has it, and must be opened within 60 s. A view link
        only watches; a control link can also take over.</p>
      <div class="buttons">
        <button type="button" class="quiet" onClick={() => void make('view')}>Make a view link</button>
        <button type="button" class="quiet" onClick={() => void make('control')}>Make a control link</button>
      </div>
      {error && <ErrorNote message={error} onDismiss={() => setError(null)} />}
      {link && (
        <div class="copyrow">
          <input ref={field} readOnly value={link.url} aria-label={`The ${link.mode} link`} />
          <button type="button" onClick={async () => setCopied((await copyText(link.url, field.current)) ? 'Copied.' : 'Copy failed: select the link and copy it.')}>Copy</button>
          {copied && <span role="status">{copied}</span>}
        </div>
      )}
    </details>
  );
}

/** The workspace page's Desktop tab. */
export function DesktopTab({ ws, state, visible, onStart }:
  { ws: string; state: string; visible: boolean; onStart: () => Promise<void> }) {
  const [access] = useState(() => sessionAccess(ws));
  const [starting, setStarting] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const running = state === 'running';
  return (
    <div>
      {!running && (
        <div class="desk-off">
          <p>The workspace is <strong>{state}</strong>; its screen is there while it runs.</p>
          {(state === 'stopped' || state === 'hibernated' || state === 'error') && (
            <button type="button" disabled={starting} onClick={async () => {
              setStarting(true);
              setError(null);
              try { await onStart(); } catch (e) { setError(errorMessage(e)); } finally { setStarting(false); }
            }}>{starting ? 'Starting…' : 'Start'}</button>
          )}
          {error && <ErrorNote message={error} />}
        </div>
      )}
      {running && <DesktopView access={access} running visible={visible} />}
    </div>
  );
}
