// Text between the person's computer and the workspace's clipboard while they hold control
// (PUT/GET …/desktop/clipboard). Typing through the screen reaches only what the guest's
// keyboard map has; the clipboard carries any Unicode: the page sends the text, berthd puts it
// on the guest's clipboard with the desktop image's own tool, and the person pastes it in the
// VM with Ctrl+V. Reading goes the other way, for the Copy button.
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, errorMessage } from './api';
import { ErrorNote, Modal, copyText, formatTime } from './ui';

/** The most text berthd takes or gives, in bytes of UTF-8 (controller/desktop/clipboard.h). */
export const kMaxClipboardBytes = 1 << 20;

const utf8 = new TextEncoder();

/** A failure of the clipboard routes in plain words: for a 423, who holds control. */
export function clipboardError(e: unknown, reading: boolean): string {
  if (e instanceof ApiError) {
    const d = e.details ?? {};
    const by = typeof d.by === 'string' ? d.by : 'unknown key';
    const since = typeof d.since === 'string' ? ` since ${formatTime(d.since)}` : '';
    if (e.status === 423 && d.private === true && reading) {
      return `A person (${by}) has held control privately${since}: while a takeover is private only that person reads the VM's clipboard through berthd (it may hold a password).`;
    }
    if (e.status === 423) return `A person (${by}) has held control${since}: only they can change the VM's clipboard.`;
    if (e.status === 409) return `This workspace has no desktop clipboard: ${e.message}`;
    if (e.status === 503) return `The VM's clipboard cannot be reached now: ${e.message}`;
    if (e.status === 413) return `Too much text: ${e.message}`;
  }
  return `${reading ? 'Reading' : 'Setting'} the VM's clipboard failed: ${errorMessage(e)}`;
}

/**
 * "Paste into VM": the person's text (from their computer's clipboard when the browser lets the
 * page read it, else pasted or typed into the box) onto the VM's clipboard. `onSent` gets the
 * bytes once berthd has put it there.
 */
export function PasteDialog({ open, onClose, send, onSent }:
  { open: boolean; onClose: () => void; send: (text: string) => Promise<number>; onSent: (bytes: number) => void }) {
  const [text, setText] = useState('');
  const [fromClipboard, setFromClipboard] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const typed = useRef(false);  // the person's own text is never replaced
  useEffect(() => {
    if (!open) return;
    setText('');
    setFromClipboard(false);
    setError(null);
    typed.current = false;
    let live = true;
    // The browser may ask the person first, or refuse (no permission, not https): the box stays.
    if (typeof navigator.clipboard?.readText === 'function') {
      navigator.clipboard.readText().then((t) => {
        if (!live || !t || typed.current) return;
        setText(t);
        setFromClipboard(true);
      }, () => {});
    }
    return () => { live = false; };
  }, [open]);
  const bytes = utf8.encode(text).length;
  const over = bytes > kMaxClipboardBytes;
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      onSent(await send(text));
    } catch (err) {
      setError(clipboardError(err, false));
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal title="Paste into the VM" open={open} onClose={onClose}>
      <form class="clip-form" onSubmit={(e) => void submit(e)}>
        <p class="muted clip-help">Put text on the VM's clipboard, then press Ctrl+V in the VM to paste it. Any
          characters work, unlike typing on the screen.</p>
        <label>Text for the VM's clipboard
          <textarea class="clip-text mono" rows={8} value={text} spellcheck={false} autoComplete="off" autoFocus
                    placeholder="Paste your text here (Ctrl+V) or type it"
                    onInput={(e) => {
                      typed.current = true;
                      setText((e.currentTarget as HTMLTextAreaElement).value);
                      setFromClipboard(false);
                    }} />
        </label>
        <p class={`clip-meta ${over ? 'over' : 'muted'}`} aria-live="polite">
          {fromClipboard ? "From your computer's clipboard: check it before sending. " : ''}
          {over ? `${bytes.toLocaleString()} bytes: at most ${kMaxClipboardBytes.toLocaleString()} (1 MiB) fit.`
            : `${bytes.toLocaleString()} bytes`}
        </p>
        {error && <ErrorNote message={error} onDismiss={() => setError(null)} />}
        <div class="actions">
          <button type="button" class="quiet" onClick={onClose}>Cancel</button>
          <button type="submit" disabled={busy || over}>{busy ? 'Sending…' : "Send to the VM's clipboard"}</button>
        </div>
      </form>
    </Modal>
  );
}

/** "Copy from VM": the VM's clipboard read once on opening (again on request), with Copy. */
export function CopyDialog({ open, onClose, read }: { open: boolean; onClose: () => void; read: () => Promise<string> }) {
  const [text, setText] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [copied, setCopied] = useState<string | null>(null);
  const [nonce, setNonce] = useState(0);
  const area = useRef<HTMLTextAreaElement>(null);
  useEffect(() => {
    if (!open) return;
    let live = true;
    setBusy(true);
    setError(null);
    setCopied(null);
    read().then((t) => { if (live) setText(t); }, (e) => {
      if (!live) return;
      setText(null);
      setError(clipboardError(e, true));
    }).finally(() => { if (live) setBusy(false); });
    return () => { live = false; };
  }, [open, nonce]);
  const copy = async () => {
    if (text === null) return;
    setCopied((await copyText(text, area.current)) ? "Copied to your computer's clipboard." : 'Copying failed: select the text and copy it (Ctrl+C).');
  };
  return (
    <Modal title="Copy from the VM" open={open} onClose={onClose}>
      <div class="clip-form">
        <label>The VM's clipboard
          <textarea ref={area} class="clip-text mono" rows={8} readOnly value={text ?? ''} spellcheck={false}
                    placeholder={busy ? "Reading the VM's clipboard…" : ''} />
        </label>
        <p class="clip-meta muted" aria-live="polite">
          {busy ? 'Reading…' : text === null ? '' : text === '' ? "The VM's clipboard holds no text: copy something in the VM first."
            : `${utf8.encode(text).length.toLocaleString()} bytes`}
        </p>
        {error && <ErrorNote message={error} />}
        {copied && <p class="clip-meta" role="status">{copied}</p>}
        <div class="actions">
          <button type="button" class="quiet" disabled={busy} onClick={() => setNonce((n) => n + 1)}>Read again</button>
          <button type="button" class="quiet" onClick={onClose}>Close</button>
          <button type="button" disabled={busy || !text} onClick={() => void copy()}>Copy</button>
        </div>
      </div>
    </Modal>
  );
}
