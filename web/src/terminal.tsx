// Terminals: xterm.js on the PTY WebSocket (GET …/exec/ws). Each terminal's shell gets a tag
// ("web-" + random); the tags are the agent's, not the page's, so after a reload (or from
// another browser) the page lists the running "web-" PTYs and reattaches with ?attach=TAG: the
// agent replays the buffered output, then goes on live. A connection that drops without an
// `end` event is retried; the pane says plainly when the shell has really ended.
import '@xterm/xterm/css/xterm.css';
import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import { useEffect, useRef, useState } from 'preact/hooks';
import { call, errorMessage, wsPath } from './api';
import { ErrorNote } from './ui';
import { mirrorInlineStyles } from './csp_styles';

interface ProcessInfo {
  pid: number;
  tag: string | null;
  pty: boolean;
  status: 'running' | 'exited';
  started_at: string;
  exit_code?: number | null;
  signal?: string | null;
}

const kTagPrefix = 'web-';
const kChannelStdin = 0;
// After an attach the agent replays what it kept; answers xterm.js would give to queries in
// that old output (cursor position, device attributes) must not reach the shell as input.
const kReplayQuietMs = 300;
const kReplayMaxMs = 3000;
const kReport = /^(\x1b\[[?>]?[\d;]*[cnRtx]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1bP[^\x1b]*\x1b\\)+$/;

function newTag(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(6));
  return kTagPrefix + Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

interface Pane {
  tag: string;
  fresh: boolean;  // start a new shell (else attach to a running one)
}

export function Terminals({ ws, visible }: { ws: string; visible: boolean }) {
  const [panes, setPanes] = useState<Pane[] | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    let cancelled = false;
    call<{ processes: ProcessInfo[] }>('GET', wsPath(ws, '/processes'))
      .then(({ processes }) => {
        if (cancelled) return;
        const running = processes
          .filter((p) => p.pty && p.status === 'running' && p.tag?.startsWith(kTagPrefix))
          .sort((a, b) => a.started_at.localeCompare(b.started_at));
        setPanes(running.length ? running.map((p) => ({ tag: p.tag!, fresh: false })) : [{ tag: newTag(), fresh: true }]);
      })
      .catch((e) => !cancelled && setError(errorMessage(e)));
    return () => void (cancelled = true);
  }, [ws]);

  if (error) {
    return (
      <div>
        <ErrorNote message={error} />
        <button type="button" onClick={() => { setError(null); setPanes([{ tag: newTag(), fresh: true }]); }}>Open a terminal</button>
      </div>
    );
  }
  if (!panes) return <p aria-busy="true">Looking for open terminals (this wakes the workspace)…</p>;
  return (
    <div>
      <div class="toolbar">
        <button type="button" onClick={() => setPanes([...panes, { tag: newTag(), fresh: true }])}>New terminal</button>
        <span class="muted">{panes.length === 1 ? '1 terminal' : `${panes.length} terminals`}; they keep running when you leave this page.</span>
      </div>
      <div class={`terminals n${Math.min(panes.length, 2)}`}>
        {panes.map((p) => (
          <TerminalPane key={p.tag} ws={ws} pane={p} visible={visible}
                        onRemove={() => setPanes(panes.filter((q) => q.tag !== p.tag))} />
        ))}
      </div>
    </div>
  );
}

type Status =
  | { kind: 'connecting' }
  | { kind: 'connected' }
  | { kind: 'reconnecting'; attempt: number }
  | { kind: 'ended'; text: string }
  | { kind: 'failed'; text: string };

function exitText(code: number | null | undefined, signal?: string | null): string {
  if (signal) return `killed by SIG${signal}`;
  return code === null || code === undefined ? 'ended' : `exit code ${code}`;
}

function TerminalPane({ ws, pane, visible, onRemove }: { ws: string; pane: Pane; visible: boolean; onRemove: () => void }) {
  const host = useRef<HTMLDivElement>(null);
  const [status, setStatus] = useState<Status>({ kind: 'connecting' });
  const control = useRef<{ close: () => void; fit: () => void; focus: () => void } | null>(null);

  useEffect(() => {
    const term = new Terminal({
      cursorBlink: true, convertEol: false, scrollback: 5000, allowProposedApi: false,
      fontFamily: 'ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace', fontSize: 14,
      theme: { background: '#111418', foreground: '#e6e6e6' },
    });
    const fit = new FitAddon();
    term.loadAddon(fit);
    const unmirror = mirrorInlineStyles(host.current!);
    term.open(host.current!);
    term.textarea?.setAttribute('aria-label', `Terminal ${pane.tag}`);
    const encoder = new TextEncoder();
    let socket: WebSocket | null = null;
    let started = !pane.fresh;  // a shell exists for this tag
    let ended = false;
    let disposed = false;
    let attempt = 0;
    let retryTimer = 0;
    let replayUntil = 0;        // while output keeps coming within kReplayQuietMs of this
    let replayHardStop = 0;

    const send = (bytes: Uint8Array) => {
      if (socket?.readyState !== WebSocket.OPEN) return;
      const frame = new Uint8Array(bytes.length + 1);
      frame[0] = kChannelStdin;
      frame.set(bytes, 1);
      socket.send(frame);
    };
    const replaying = () => {
      const now = Date.now();
      return now < replayUntil && now < replayHardStop;
    };
    term.onData((data) => {
      if (replaying() && kReport.test(data)) return;
      send(encoder.encode(data));
    });
    term.onBinary((data) => {
      if (replaying()) return;
      send(Uint8Array.from(data, (c) => c.charCodeAt(0) & 0xff));
    });
    term.onResize(({ cols, rows }) => {
      if (socket?.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: 'resize', cols, rows }));
    });

    const finish = (text: string) => {
      ended = true;
      setStatus({ kind: 'ended', text });
      term.options.cursorBlink = false;
    };

    // Why did the socket close without an `end`? Ask the agent about the tag.
    const afterDrop = async () => {
      if (disposed || ended) return;
      try {
        const p = await call<ProcessInfo>('GET', wsPath(ws, `/processes/${encodeURIComponent(pane.tag)}`));
        if (p.status === 'exited') {
          finish(`The session has ended (${exitText(p.exit_code, p.signal)}).`);
          return;
        }
      } catch (e) {
        const status = (e as { status?: number }).status;
        if (status === 404) {
          finish(started ? 'The session has ended (its shell is gone from the workspace).' : 'The session could not start.');
          return;
        }
        if (status === 401) return;  // signed out: the app shows the sign-in form
      }
      attempt += 1;
      setStatus({ kind: 'reconnecting', attempt });
      retryTimer = window.setTimeout(connect, Math.min(1000 * 2 ** Math.min(attempt - 1, 4), 15000));
    };

    const connect = () => {
      if (disposed) return;
      const scheme = window.location.protocol === 'https:' ? 'wss' : 'ws';
      const attach = started ? `?attach=${encodeURIComponent(pane.tag)}` : '';
      const s = new WebSocket(`${scheme}://${window.location.host}${wsPath(ws, '/exec/ws')}${attach}`);
      s.binaryType = 'arraybuffer';
      socket = s;
      s.onopen = () => {
        if (!started) {
          try { fit.fit(); } catch { /* hidden */ }
          s.send(JSON.stringify({
            type: 'start', tag: pane.tag, pty: { cols: term.cols, rows: term.rows },
            env: { TERM: 'xterm-256color', COLORTERM: 'truecolor' },
          }));
        }
      };
      s.onmessage = (ev) => {
        if (typeof ev.data === 'string') {
          let msg: { type?: string; exit_code?: number | null; signal?: string | null; error?: { message?: string } };
          try { msg = JSON.parse(ev.data); } catch { return; }
          if (msg.type === 'started' || msg.type === 'attached') {
            if (msg.type === 'attached') {
              // What follows first is the replay of the kept output, onto a clean screen.
              term.reset();
              replayUntil = Date.now() + kReplayQuietMs;
              replayHardStop = Date.now() + kReplayMaxMs;
              s.send(JSON.stringify({ type: 'resize', cols: term.cols, rows: term.rows }));
            }
            started = true;
            attempt = 0;
            setStatus({ kind: 'connected' });
          } else if (msg.type === 'end') {
            finish(`The session has ended (${exitText(msg.exit_code, msg.signal)}).`);
          } else if (msg.type === 'error') {
            const text = msg.error?.message ?? 'the agent refused the session';
            if (!started) {
              ended = true;
              setStatus({ kind: 'failed', text });
            } else {
              term.write(`\r\n\x1b[31m[${text}]\x1b[0m\r\n`);
            }
          }
          return;
        }
        const bytes = new Uint8Array(ev.data as ArrayBuffer);
        if (bytes.length < 1) return;
        if (Date.now() < replayUntil) replayUntil = Date.now() + kReplayQuietMs;
        term.write(bytes.subarray(1));
      };
      s.onclose = () => {
        if (socket === s) socket = null;
        void afterDrop();
      };
    };

    // The network is back (a laptop's Wi-Fi, a VPN reconnecting): a socket that looks open may
    // be dead without knowing it, and a retry may be waiting out its back-off. Reattach now;
    // the replay starts from a clean screen, so nothing shows twice.
    const onOnline = () => {
      if (disposed || ended || !started) return;
      window.clearTimeout(retryTimer);
      const old = socket;
      if (old) {
        old.onclose = null;
        old.close();
      }
      socket = null;
      setStatus({ kind: 'reconnecting', attempt: Math.max(attempt, 1) });
      connect();
    };
    window.addEventListener('online', onOnline);

    const ro = new ResizeObserver(() => {
      if (host.current && host.current.offsetWidth > 0) {
        try { fit.fit(); } catch { /* not laid out */ }
      }
    });
    ro.observe(host.current!);
    control.current = {
      close: () => {
        if (socket?.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: 'signal', signal: 'HUP' }));
      },
      fit: () => { try { fit.fit(); } catch { /* hidden */ } },
      focus: () => term.focus(),
    };
    setStatus({ kind: 'connecting' });
    connect();
    return () => {
      disposed = true;
      window.clearTimeout(retryTimer);
      window.removeEventListener('online', onOnline);
      ro.disconnect();
      socket?.close();
      term.dispose();
      unmirror();
    };
  }, [ws, pane.tag]);

  useEffect(() => {
    if (visible) {
      control.current?.fit();
      control.current?.focus();
    }
  }, [visible]);

  const label = status.kind === 'connected' ? 'connected'
    : status.kind === 'connecting' ? (pane.fresh ? 'starting a shell…' : 'reattaching…')
    : status.kind === 'reconnecting' ? `connection lost, reconnecting (attempt ${status.attempt})…`
    : status.kind === 'ended' ? 'ended' : 'failed';
  return (
    <div class={`term-pane ${status.kind}`} role="region" aria-label={`Terminal ${pane.tag}`}>
      <div class="term-head">
        <span class="tagname">{pane.tag}</span>
        <span class="term-status" role="status">{label}</span>
        {status.kind === 'ended' || status.kind === 'failed'
          ? <button type="button" class="quiet" onClick={onRemove}>Remove</button>
          : <button type="button" class="quiet" onClick={() => control.current?.close()}
                    title="Ends this shell (SIGHUP)">End session</button>}
      </div>
      <div class="term-host" ref={host} />
      {(status.kind === 'ended' || status.kind === 'failed') && (
        <p class={status.kind === 'failed' ? 'term-note error' : 'term-note'} role="alert">
          {status.kind === 'failed' ? `The terminal could not start: ${status.text}` : status.text}
        </p>
      )}
    </div>
  );
}
