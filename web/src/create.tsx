// The create form: POST /v1/workspaces, from an image ({name, image, size, ...}) or from a
// template ({name, template, labels}: a fork of the template's checkpoint, which has its
// workspace's image, size and settings, so those fields are not offered). The new row then
// shows its progress (creating → running) from the live stream.
import { useEffect, useState } from 'preact/hooks';
import { call, errorMessage, listTemplates, templateReady, type Template, type Workspace } from './api';
import { ErrorNote } from './ui';

/** "A=1\nB=two" → {A: "1", B: "two"}; throws on a line without "=". */
export function parsePairs(text: string, what: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line) continue;
    const i = line.indexOf('=');
    if (i <= 0) throw new Error(`${what}: "${line}" is not KEY=VALUE`);
    out[line.slice(0, i).trim()] = line.slice(i + 1);
  }
  return out;
}

export function CreateForm({ onCreated, onCancel, template }:
  { onCreated: (w: Workspace) => void; onCancel: () => void; template?: string }) {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // One key per form: a retried submit (a network blip) cannot make two workspaces.
  const [idempotencyKey] = useState(() => crypto.randomUUID());
  const [source, setSource] = useState<'image' | 'template'>(template ? 'template' : 'image');
  const [templates, setTemplates] = useState<Template[] | null>(null);
  const [chosen, setChosen] = useState(template ?? '');
  useEffect(() => {
    const ctl = new AbortController();
    listTemplates(ctl.signal).then((all) => {
      const t = all.filter(templateReady);  // one still building cannot be started from yet
      setTemplates(t);
      setChosen((c) => c || t[0]?.name || '');
    }).catch((e) => {
      if (!ctl.signal.aborted) setError(`The templates could not be listed: ${errorMessage(e)}`);
    });
    return () => ctl.abort();
  }, []);
  const picked = templates?.find((t) => t.name === chosen);

  const submit = async (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const s = (k: string) => String(f.get(k) ?? '').trim();
    let body: Record<string, unknown>;
    try {
      if (source === 'template') {
        if (!chosen) throw new Error('Template: choose one');
        const labels = parsePairs(s('labels'), 'Labels');
        body = { name: s('name'), template: chosen };
        if (Object.keys(labels).length) body.labels = labels;
      } else {
        const minutes = Number(s('idle_minutes'));
        if (!Number.isFinite(minutes) || minutes <= 0) throw new Error('Idle timeout: enter a number of minutes above 0');
        body = {
          name: s('name'), image: s('image') || 'base', size: s('size'), screen: s('screen'),
          idle_timeout: Math.round(minutes * 60), idle_action: s('idle_action'),
          env: parsePairs(s('env'), 'Environment'), labels: parsePairs(s('labels'), 'Labels'),
        };
      }
    } catch (err) {
      setError(errorMessage(err));
      return;
    }
    setBusy(true);
    setError(null);
    try {
      const w = await call<Workspace>('POST', '/v1/workspaces', { body, headers: { 'Idempotency-Key': idempotencyKey } });
      onCreated(w);
    } catch (err) {
      setError(errorMessage(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="create" onSubmit={submit}>
      <label>Name <input name="name" required maxLength={63} autoFocus autoComplete="off" spellcheck={false} /></label>
      <fieldset class="source">
        <legend>Start from</legend>
        <label class="check"><input type="radio" name="source" value="image" checked={source === 'image'}
                                    onChange={() => setSource('image')} /> an image (a fresh boot)</label>
        <label class="check"><input type="radio" name="source" value="template" checked={source === 'template'}
                                    disabled={templates !== null && templates.length === 0}
                                    onChange={() => setSource('template')} />
          a template{templates !== null && templates.length === 0 ? ' (none yet)' : ' (resumes with its programs running)'}</label>
      </fieldset>
      {source === 'template' ? (
        <>
          <label>Template
            <select name="template" value={chosen} onChange={(e) => setChosen((e.currentTarget as HTMLSelectElement).value)}>
              {templates === null && <option value="">Loading…</option>}
              {(templates ?? []).map((t) => <option key={t.id} value={t.name}>{t.name}</option>)}
            </select>
          </label>
          {picked && (
            <p class="muted tplfacts">
              {picked.image ? <>{picked.image} · {picked.cpus} vCPU · {picked.memory_mib} MiB · {picked.disk_gib} GiB disk; </> : null}
              made from {picked.workspace ?? picked.workspace_id}. Size, settings and network policy are the template's.
            </p>
          )}
        </>
      ) : (
        <>
          <div class="row2">
            <label>Image <input name="image" placeholder="base" defaultValue="base" /></label>
            <label>Size
              <select name="size" defaultValue="small">
                <option value="small">small (1 vCPU, 1 GiB)</option>
                <option value="medium">medium (2 vCPU, 2 GiB)</option>
                <option value="large">large (2 vCPU, 4 GiB)</option>
              </select>
            </label>
          </div>
          <div class="row2">
            <label>Idle timeout (minutes) <input name="idle_minutes" type="number" min="1" step="1" defaultValue="30" /></label>
            <label>When idle
              <select name="idle_action" defaultValue="stop">
                <option value="stop">stop</option>
                <option value="hibernate">hibernate (keeps processes)</option>
              </select>
            </label>
          </div>
          <label>Screen <span class="muted">(the desktop's, for a desktop image)</span>
            <select name="screen" defaultValue="1280x800">
              {['1280x800', '1024x768', '1366x768', '1440x900', '1920x1080'].map((v) => <option value={v}>{v.replace('x', ' × ')}</option>)}
            </select>
          </label>
          <label>Environment <span class="muted">(KEY=VALUE, one a line)</span>
            <textarea name="env" rows={2} spellcheck={false} /></label>
        </>
      )}
      <label>Labels <span class="muted">(key=value, one a line)</span>
        <textarea name="labels" rows={2} spellcheck={false} /></label>
      {error && <ErrorNote message={error} />}
      <div class="actions">
        <button type="button" class="quiet" onClick={onCancel}>Cancel</button>
        <button type="submit" disabled={busy}>{busy ? 'Creating…' : 'Create'}</button>
      </div>
    </form>
  );
}
