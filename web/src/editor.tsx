// The viewer and editor for small text files (Files tab, ?file=PATH): up to kMaxEditBytes of
// UTF-8 without NUL bytes; anything larger or binary is refused with a download link instead.
// Saving is a PUT of the whole text (the agent writes it atomically and keeps the file's mode);
// if the file changed in the workspace since it was opened, saving asks before overwriting.
import { useEffect, useRef, useState } from 'preact/hooks';
import { call, csrfHeaders, errorFromText, errorMessage, filePath, networkError } from './api';
import { Confirm, ErrorNote, formatBytes, formatTime } from './ui';

/** The largest file the editor opens: a textarea stays responsive well past this. */
export const kMaxEditBytes = 1024 * 1024;

interface Stat {
  path: string;
  type: string;
  size: number;
  mode: string;
  mtime: string;
}

type Loaded =
  | { kind: 'loading' }
  | { kind: 'refused'; why: string }
  | { kind: 'failed'; why: string }
  | { kind: 'text'; text: string; crlf: boolean; stat: Stat };

/** Why `bytes` is not text the editor can round-trip, or the text. */
export function decodeText(bytes: Uint8Array): { text: string } | { why: string } {
  if (bytes.includes(0)) return { why: 'it is a binary file (it has NUL bytes)' };
  try {
    // ignoreBOM: a byte-order mark stays in the text, so saving writes it back.
    return { text: new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes) };
  } catch {
    return { why: 'it is not UTF-8 text' };
  }
}

function baseName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1) || path;
}

export function FileEditor({ ws, path, onClose }: { ws: string; path: string; onClose: () => void }) {
  const [loaded, setLoaded] = useState<Loaded>({ kind: 'loading' });
  const [draft, setDraft] = useState('');
  const [saving, setSaving] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [note, setNote] = useState<string | null>(null);
  const [conflict, setConflict] = useState<Stat | null>(null);
  const [leaving, setLeaving] = useState(false);
  const area = useRef<HTMLTextAreaElement>(null);
  const name = baseName(path);

  const open = async () => {
    setLoaded({ kind: 'loading' });
    setError(null);
    setNote(null);
    try {
      const stat = await call<Stat>('GET', `${filePath(ws, path)}?stat=1`);
      if (stat.type !== 'file') {
        setLoaded({ kind: 'refused', why: `${path} is a ${stat.type}, not a file` });
        return;
      }
      if (stat.size > kMaxEditBytes) {
        setLoaded({ kind: 'refused', why: `${name} is ${formatBytes(stat.size)}; the editor opens text files up to ${formatBytes(kMaxEditBytes)}` });
        return;
      }
      let r: Response;
      try {
        r = await fetch(filePath(ws, path), { credentials: 'same-origin' });
      } catch (e) {
        throw networkError(e);
      }
      if (!r.ok) throw errorFromText(r.status, r.statusText, await r.text());
      const bytes = new Uint8Array(await r.arrayBuffer());
      if (bytes.length > kMaxEditBytes) {
        setLoaded({ kind: 'refused', why: `${name} grew to ${formatBytes(bytes.length)}; the editor opens text files up to ${formatBytes(kMaxEditBytes)}` });
        return;
      }
      const decoded = decodeText(bytes);
      if ('why' in decoded) {
        setLoaded({ kind: 'refused', why: `${name} cannot be shown as text: ${decoded.why}` });
        return;
      }
      // A <textarea> turns CRLF into LF: remember which the file used and write that back.
      const crlf = decoded.text.includes('\r\n');
      const text = crlf ? decoded.text.replace(/\r\n/g, '\n') : decoded.text;
      setLoaded({ kind: 'text', text, crlf, stat: { ...stat, size: bytes.length } });
      setDraft(text);
    } catch (e) {
      setLoaded({ kind: 'failed', why: errorMessage(e) });
    }
  };
  useEffect(() => void open(), [ws, path]);

  const dirty = loaded.kind === 'text' && draft !== loaded.text;
  useEffect(() => {
    if (!dirty) return undefined;
    const warn = (e: BeforeUnloadEvent) => e.preventDefault();
    window.addEventListener('beforeunload', warn);
    return () => window.removeEventListener('beforeunload', warn);
  }, [dirty]);

  const write = async () => {
    if (loaded.kind !== 'text') return;
    setConflict(null);
    setSaving(true);
    setError(null);
    setNote(null);
    const text = draft;
    try {
      let r: Response;
      try {
        r = await fetch(filePath(ws, path), {
          method: 'PUT', credentials: 'same-origin',
          headers: { 'Content-Type': 'application/octet-stream', ...csrfHeaders('PUT') },
          body: loaded.crlf ? text.replace(/\n/g, '\r\n') : text,
        });
      } catch (e) {
        throw networkError(e);
      }
      const answer = await r.text();
      if (!r.ok) throw errorFromText(r.status, r.statusText, answer);
      let stat: Stat = loaded.stat;
      try {
        stat = JSON.parse(answer) as Stat;
      } catch {
        stat = await call<Stat>('GET', `${filePath(ws, path)}?stat=1`);
      }
      setLoaded({ ...loaded, text, stat });
      setNote(`Saved ${name} (${formatBytes(stat.size)}) at ${new Date().toLocaleTimeString()}.`);
    } catch (e) {
      setError(`Saving ${name} failed: ${errorMessage(e)}`);
    } finally {
      setSaving(false);
    }
  };

  // Before writing: has someone else changed the file since it was opened?
  const save = async () => {
    if (loaded.kind !== 'text' || saving) return;
    try {
      const now = await call<Stat>('GET', `${filePath(ws, path)}?stat=1`);
      if (now.mtime !== loaded.stat.mtime || now.size !== loaded.stat.size) {
        setConflict(now);
        return;
      }
    } catch (e) {
      if ((e as { status?: number }).status !== 404) {  // gone: saving makes it again
        setError(`Saving ${name} failed: ${errorMessage(e)}`);
        return;
      }
    }
    await write();
  };

  const close = () => (dirty ? setLeaving(true) : onClose());

  return (
    <div class="editor">
      <div class="toolbar editor-head">
        <h2 class="filename mono">{path}</h2>
        {loaded.kind === 'text' && (
          <span class="muted">{formatBytes(loaded.stat.size)} · mode {loaded.stat.mode} · modified {formatTime(loaded.stat.mtime)}
            {loaded.crlf && ' · CRLF line endings'}</span>
        )}
        <div class="buttons">
          {loaded.kind === 'text' && (
            <>
              <button type="button" onClick={() => void save()} disabled={!dirty || saving}
                      aria-keyshortcuts="Control+S">{saving ? 'Saving…' : 'Save'}</button>
              <button type="button" class="quiet" onClick={() => setDraft(loaded.text)} disabled={!dirty || saving}>Revert</button>
            </>
          )}
          <a class="button quiet" href={filePath(ws, path)} download={name}>Download</a>
          <button type="button" class="quiet" onClick={close}>Close</button>
        </div>
      </div>
      {error && <ErrorNote message={error} onDismiss={() => setError(null)} />}
      {note && !dirty && <p role="status" class="note">{note}</p>}
      {loaded.kind === 'loading' && <p aria-busy="true">Opening {name}…</p>}
      {loaded.kind === 'failed' && <ErrorNote message={`Opening ${name} failed: ${loaded.why}`} />}
      {loaded.kind === 'refused' && (
        <div class="refused" role="alert">
          <p>{loaded.why}.</p>
          <p><a href={filePath(ws, path)} download={name}>Download {name}</a> to open it on your computer.</p>
        </div>
      )}
      {loaded.kind === 'text' && (
        <>
          <label class="sr-only" for="file-text">Contents of {name}</label>
          <textarea id="file-text" ref={area} class="filetext mono" value={draft} spellcheck={false} autoComplete="off"
                    wrap="off" aria-describedby="editor-state"
                    onInput={(e) => setDraft((e.currentTarget as HTMLTextAreaElement).value)}
                    onKeyDown={(e) => {
                      if ((e.ctrlKey || e.metaKey) && e.key.toLowerCase() === 's') {
                        e.preventDefault();
                        void save();
                      }
                    }} />
          <p id="editor-state" class="muted" aria-live="polite">
            {dirty ? 'Unsaved changes (Ctrl+S saves).' : 'No unsaved changes.'} {draft.split('\n').length} lines.
          </p>
        </>
      )}
      <Confirm open={!!conflict} danger title={`${name} changed in the workspace`} action="Overwrite"
               message={`It was modified ${formatTime(conflict?.mtime)} (now ${formatBytes(conflict?.size ?? 0)}), after you opened it. Saving replaces that version with yours.`}
               onCancel={() => setConflict(null)} onConfirm={() => void write()} />
      <Confirm open={leaving} danger title={`Discard your changes to ${name}?`} action="Discard"
               message="They have not been saved." onCancel={() => setLeaving(false)}
               onConfirm={() => { setLeaving(false); onClose(); }} />
    </div>
  );
}
