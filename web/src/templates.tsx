// The tenant's templates (GET /v1/templates), on the workspaces page: what each one is made from,
// its state (a build's: building, ready or failed, with why and its build log), what a workspace
// made from it is, a new workspace from one, and delete (asking first). Templates are published
// from a workspace's Checkpoints tab, or built by berthd from a script ("New template from a
// script": POST /v1/templates {name, script, ...}, answered 202 building). While any template is
// building the list is asked again every 2 s, and no longer once none is.
import { useEffect, useState } from 'preact/hooks';
import { call, errorMessage, getTemplate, listTemplates, templateReady, type Template } from './api';
import { Confirm, ErrorNote, Modal, formatTime, kNameHint, kNamePattern } from './ui';

/** How often the list is asked again while a template is being built: a build boots a workspace
 * and runs a script (tens of seconds at least), so 2 s shows its end soon enough. */
const kBuildPollMs = 2000;
/** berthd's limit on a build template's name: its workspace is "template-<name>", and a workspace
 * name has at most 57 characters. */
const kMaxBuiltName = 48;

function TemplateStatePill({ state }: { state: string }) {
  return (
    <span class={`pill t-${state}`}>
      {state === 'building' && <span class="spinner" aria-hidden="true" />}{state}
    </span>
  );
}

/** A build's script and log, read (GET /v1/templates/{name}) when first opened: the list has no
 * build_log. */
function BuildLog({ t }: { t: Template }) {
  const [full, setFull] = useState<Template | null>(null);
  const [error, setError] = useState<string | null>(null);
  const open = async (e: Event) => {
    if (!(e.currentTarget as HTMLDetailsElement).open || full) return;
    try {
      setFull(await getTemplate(t.id));
    } catch (err) {
      setError(errorMessage(err));
    }
  };
  return (
    <details class="buildlog" onToggle={(e) => void open(e)}>
      <summary>Script and build log</summary>
      <div class="muted small">Script</div>
      <pre class="script">{t.script}</pre>
      {t.start && <div class="muted small">then, in the background: <code>{t.start}</code></div>}
      {t.ready && <div class="muted small">ready once this exits 0: <code>{t.ready}</code></div>}
      <div class="muted small">Build log (its last 16 KiB)</div>
      {error ? <ErrorNote message={`The build log could not be read: ${error}`} />
        : full === null ? <p class="muted" aria-busy="true">Loading the log…</p>
        : full.build_log ? <pre class="log">{full.build_log}</pre>
        : <p class="muted">The build wrote nothing.</p>}
    </details>
  );
}

export function TemplateList({ onCreateFrom, revision }: { onCreateFrom: (t: Template) => void; revision?: number }) {
  const [templates, setTemplates] = useState<Template[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [deleting, setDeleting] = useState<Template | null>(null);
  const [building, setBuilding] = useState(false);
  const [note, setNote] = useState<string | null>(null);
  // The build the note speaks of: once it ends the note says how, instead of "building".
  const [watching, setWatching] = useState<string | null>(null);
  // Counts the answers (and failures): each one sets the next poll while a build runs.
  const [loads, setLoads] = useState(0);

  const load = async () => {
    try {
      setTemplates(await listTemplates());
      setError(null);
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setLoads((n) => n + 1);
    }
  };
  useEffect(() => void load(), [revision]);
  const anyBuilding = templates?.some((t) => t.state === 'building') ?? false;
  useEffect(() => {
    const t = watching ? templates?.find((x) => x.name === watching) : undefined;
    if (!t || t.state === 'building') return;
    setWatching(null);
    setNote(t.state === 'failed' ? `Template ${t.name} failed to build: ${t.error ?? 'see its log below'}.`
                                 : `Template ${t.name} is built: create a workspace from it.`);
  }, [templates, watching]);
  useEffect(() => {
    if (!anyBuilding) return;
    const timer = window.setTimeout(() => void load(), kBuildPollMs);
    return () => window.clearTimeout(timer);
  }, [anyBuilding, loads]);

  const remove = async (t: Template) => {
    setDeleting(null);
    try {
      await call('DELETE', `/v1/templates/${encodeURIComponent(t.name)}`);
      setNote(`Template ${t.name} deleted. Workspaces made from it go on.`);
      void load();
    } catch (e) {
      setError(`Deleting template ${t.name}: ${errorMessage(e)}`);
    }
  };

  return (
    <section class="templates" aria-labelledby="templates-title">
      <div class="heading sub">
        <h2 id="templates-title">Templates</h2>
        <div class="buttons">
          <button type="button" class="quiet" onClick={() => void load()}>Refresh</button>
          <button type="button" onClick={() => setBuilding(true)}>New template from a script</button>
        </div>
      </div>
      {error && <ErrorNote message={error} onDismiss={() => setError(null)} />}
      {note && <p role="status" class="note">{note}</p>}
      {templates === null ? (error ? null : <p class="muted" aria-busy="true">Loading…</p>) : templates.length === 0 ? (
        <p class="muted">No templates yet. Build one from a script (New template from a script), or publish one from a
          workspace's Checkpoints tab (a checkpoint with memory): a workspace made from it resumes with its programs already
          running.</p>
      ) : (
        <table class="list">
          <thead><tr><th scope="col">Name</th><th scope="col">State</th><th scope="col">Made from</th>
            <th scope="col">A workspace from it</th><th scope="col">Created</th>
            <th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>{templates.map((t) => {
            const state = t.state ?? 'ready';
            return (
              <tr key={t.id} data-template={t.name} data-state={state}>
                <td data-label="Name">{t.name}</td>
                <td data-label="State"><TemplateStatePill state={state} />
                  {state === 'building' && <div class="muted small">{t.workspace ?? `template-${t.name}`} runs the script
                    {t.timeout_s ? ` (at most ${Math.round(t.timeout_s / 60)} min)` : ''}</div>}
                  {t.error && <div class="errtext">{t.error}</div>}
                  {t.script !== undefined && state !== 'building' && <BuildLog t={t} />}</td>
                <td data-label="Made from">
                  {t.script !== undefined && <div>a script</div>}
                  {t.workspace
                    ? <a href={`/w/${encodeURIComponent(t.workspace)}/checkpoints`}>{t.workspace}</a>
                    : t.script === undefined && <span class="muted">{t.workspace_id} (gone)</span>}
                  {t.checkpoint_id && <div class="muted mono small">{t.checkpoint_id}</div>}</td>
                <td data-label="A workspace from it">{t.image
                  ? <>{t.image} <span class="muted">{t.cpus} vCPU · {t.memory_mib} MiB · {t.disk_gib} GiB disk</span></>
                  : <span class="muted">—</span>}</td>
                <td data-label="Created">{formatTime(t.created_at)}</td>
                <td class="row-actions"><div class="buttons">
                  {templateReady(t) && <button type="button" class="quiet" onClick={() => onCreateFrom(t)}>New workspace</button>}
                  {state !== 'building' && <button type="button" class="quiet danger" onClick={() => setDeleting(t)}>Delete</button>}
                </div></td>
              </tr>
            );
          })}
          </tbody>
        </table>
      )}
      <Confirm open={!!deleting} danger title={`Delete template ${deleting?.name ?? ''}?`} action="Delete template"
               message={deleting?.script !== undefined
                 ? <>New workspaces can no longer be made from it; those made from it go on.
                   {deleting?.workspace ? <> Its workspace {deleting.workspace} is deleted too, unless forks stand on its
                     checkpoint.</> : null}</>
                 : <>New workspaces can no longer be made from it; those made from it go on. Its checkpoint stays in{' '}
                   {deleting?.workspace ?? 'its workspace'}'s Checkpoints tab.</>}
               onCancel={() => setDeleting(null)} onConfirm={() => deleting && void remove(deleting)} />
      {building && (
        <ScriptTemplateDialog onClose={() => setBuilding(false)}
                              onDone={(t) => {
                                setBuilding(false);
                                setNote(`Building template ${t.name} in workspace ${t.workspace ?? `template-${t.name}`}: ` +
                                        'its state below changes when the build ends.');
                                setWatching(t.name);
                                void load();
                              }} />
      )}
    </section>
  );
}

/** "New template from a script": POST /v1/templates {name, script, start?, ready?, image, size,
 * timeout_s?}; berthd answers 202 with the template building. */
function ScriptTemplateDialog({ onClose, onDone }: { onClose: () => void; onDone: (t: Template) => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const s = (k: string) => String(f.get(k) ?? '').trim();
    const body: Record<string, unknown> = { name: s('name'), script: String(f.get('script') ?? '') };
    if (s('start')) body.start = s('start');
    if (s('ready')) body.ready = s('ready');
    body.image = s('image');
    body.size = s('size');
    if (s('timeout_min')) body.timeout_s = Math.round(Number(s('timeout_min')) * 60);
    setBusy(true);
    setError(null);
    try {
      onDone(await call<Template>('POST', '/v1/templates', { body }));
    } catch (err) {
      setError(errorMessage(err));
      setBusy(false);
    }
  };
  return (
    <Modal title="New template from a script" open onClose={onClose}>
      <form class="create" onSubmit={submit}>
        <p class="muted">berthd makes a workspace <code>template-NAME</code>, runs the script in it (<code>bash -e</code>, as its
          user, in their home), starts <em>Start</em> in the background, waits until <em>Ready</em> exits 0, and checkpoints its
          memory: a workspace made from the template resumes with those programs running.</p>
        <label>Template name <input name="name" required maxLength={kMaxBuiltName} pattern={kNamePattern}
                                    title={`${kNameHint}; at most ${kMaxBuiltName} characters`} autoFocus autoComplete="off"
                                    spellcheck={false} /></label>
        <label>Script <textarea name="script" required rows={5} spellcheck={false} class="mono"
                                placeholder={'git clone https://github.com/me/app && cd app\nnpm ci'} /></label>
        <label>Start <span class="muted">(optional: a dev server, a database)</span>
          <input name="start" autoComplete="off" spellcheck={false} placeholder="cd app && npm run dev" /></label>
        <label>Ready <span class="muted">(optional: run every second until it exits 0)</span>
          <input name="ready" autoComplete="off" spellcheck={false} placeholder="curl -sf http://127.0.0.1:3000/" /></label>
        <div class="row2">
          <label>Image
            <select name="image" defaultValue="base">
              <option value="base">base</option>
              <option value="desktop">desktop</option>
            </select>
          </label>
          <label>Size
            <select name="size" defaultValue="small">
              <option value="small">small (1 vCPU, 1 GiB)</option>
              <option value="medium">medium (2 vCPU, 2 GiB)</option>
              <option value="large">large (2 vCPU, 4 GiB)</option>
            </select>
          </label>
        </div>
        <label>Time limit (minutes) <span class="muted">(optional; the build's, all of it: 30 unless set, at most 120)</span>
          <input name="timeout_min" type="number" min="1" max="120" step="1" placeholder="30" /></label>
        {error && <ErrorNote message={error} />}
        <div class="actions">
          <button type="button" class="quiet" onClick={onClose}>Cancel</button>
          <button type="submit" disabled={busy}>{busy ? 'Starting the build…' : 'Build template'}</button>
        </div>
      </form>
    </Modal>
  );
}
