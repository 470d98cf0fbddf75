// The workspaces, live: one EventSource on GET /v1/watch/workspaces (a snapshot, then each
// change), never polled. Filters live in the address (?state=, ?label=K=V) so they survive a
// reload and can be shared.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { call, errorMessage, wsPath, type Workspace } from './api';
import { navigate } from './router';
import { Confirm, ErrorNote, Modal, StatePill, formatDuration, isBusy, useNow } from './ui';
import { CreateForm } from './create';
import { TemplateList } from './templates';

type Stream = 'connecting' | 'live' | 'reconnecting' | 'closed';

/** Every workspace of the tenant, kept current by berthd's event stream. */
export function useWorkspaces(): { list: Map<string, Workspace>; stream: Stream; put: (w: Workspace) => void } {
  const [list, setList] = useState<Map<string, Workspace>>(new Map());
  const [stream, setStream] = useState<Stream>('connecting');
  useEffect(() => {
    const es = new EventSource('/v1/watch/workspaces');
    es.addEventListener('open', () => setStream('live'));
    es.addEventListener('snapshot', (e) => {
      const body = JSON.parse((e as MessageEvent<string>).data) as { workspaces: Workspace[] };
      setList(new Map(body.workspaces.map((w) => [w.id, w])));
      setStream('live');
    });
    es.addEventListener('workspace', (e) => {
      const w = JSON.parse((e as MessageEvent<string>).data) as Workspace;
      setList((old) => new Map(old).set(w.id, w));
    });
    es.addEventListener('deleted', (e) => {
      const { id } = JSON.parse((e as MessageEvent<string>).data) as { id: string };
      setList((old) => {
        const next = new Map(old);
        next.delete(id);
        return next;
      });
    });
    es.addEventListener('error', () => {
      if (es.readyState === EventSource.CLOSED) {
        setStream('closed');
        // A refused stream (401 when the session ended) closes for good: find out why.
        call('GET', '/v1/sessions/current').catch(() => {});
      } else {
        setStream('reconnecting');
      }
    });
    return () => es.close();
  }, []);
  const put = (w: Workspace) => setList((old) => new Map(old).set(w.id, w));
  return { list, stream, put };
}

export function IdleInfo({ w, now }: { w: Workspace; now: number }) {
  if (w.state !== 'running' || !w.awake) return <span class="muted">—</span>;
  const reasons = w.awake.reasons ?? [];
  const idleAt = w.awake.idle_at ? Date.parse(w.awake.idle_at) : NaN;
  const action = w.idle_action === 'hibernate' ? 'hibernates' : 'stops';
  return (
    <span class="idle">
      {reasons.length > 0 ? (
        <span>awake: {reasons.join(', ')}</span>
      ) : Number.isFinite(idleAt) ? (
        <span>idle, {action} in <time dateTime={w.awake.idle_at!}>{formatDuration((idleAt - now) / 1000)}</time></span>
      ) : (
        <span>idle</span>
      )}
    </span>
  );
}

export function Lifecycle({ w, put, onError, compact }:
  { w: Workspace; put: (w: Workspace) => void; onError: (m: string) => void; compact?: boolean }) {
  const [busy, setBusy] = useState<string | null>(null);
  const [confirmDelete, setConfirmDelete] = useState(false);
  const act = async (action: string) => {
    setBusy(action);
    try {
      const path = action === 'delete' ? wsPath(w.id) : wsPath(w.id, `/${action}`);
      const answer = await call<Workspace>(action === 'delete' ? 'DELETE' : 'POST', path);
      if (answer && answer.id) put(answer);
      if (action === 'delete' && compact) navigate('/');
    } catch (e) {
      onError(`${action} ${w.name}: ${errorMessage(e)}`);
    } finally {
      setBusy(null);
    }
  };
  const s = w.state;
  const can = {
    start: s === 'stopped' || s === 'hibernated' || s === 'error',
    stop: s === 'running' || s === 'starting',
    hibernate: s === 'running',
    delete: s !== 'deleting',
  };
  return (
    <div class="buttons" role="group" aria-label={`Actions for ${w.name}`}>
      {can.start && <button type="button" disabled={!!busy} onClick={() => act('start')}>{busy === 'start' ? 'Starting…' : 'Start'}</button>}
      {can.stop && <button type="button" disabled={!!busy} onClick={() => act('stop')}>{busy === 'stop' ? 'Stopping…' : 'Stop'}</button>}
      {can.hibernate && <button type="button" disabled={!!busy} onClick={() => act('hibernate')}>{busy === 'hibernate' ? 'Hibernating…' : 'Hibernate'}</button>}
      {can.delete && <button type="button" class="danger" disabled={!!busy} onClick={() => setConfirmDelete(true)}>Delete</button>}
      <Confirm open={confirmDelete} title={`Delete ${w.name}?`} danger action="Delete for good"
               message={<>Its disks, <code>/workspace</code> included, are removed. This cannot be undone.</>}
               onCancel={() => setConfirmDelete(false)}
               onConfirm={() => { setConfirmDelete(false); void act('delete'); }} />
    </div>
  );
}

/** While a workspace is between states: how long it has been at it. */
export function Progress({ w, now }: { w: Workspace; now: number }) {
  if (!isBusy(w.state)) return null;
  const since = Date.parse(w.updated_at);
  return (
    <span class="progress">
      <progress aria-label={`${w.name} is ${w.state}`} />
      {Number.isFinite(since) && <span class="muted">{formatDuration((now - since) / 1000)}</span>}
    </span>
  );
}

const kStates = ['running', 'starting', 'creating', 'stopping', 'stopped', 'hibernating', 'hibernated', 'deleting', 'error'];

export function WorkspaceList({ query }: { query: URLSearchParams }) {
  const { list, stream, put } = useWorkspaces();
  const [error, setError] = useState<string | null>(null);
  // The create dialog, and the template it starts from when opened from the templates' list.
  const [creating, setCreating] = useState(false);
  const [fromTemplate, setFromTemplate] = useState<string | undefined>(undefined);
  const now = useNow();
  const stateFilter = query.get('state') ?? '';
  const labelFilter = query.get('label') ?? '';

  const setFilter = (key: string, value: string) => {
    const q = new URLSearchParams(query);
    if (value) q.set(key, value);
    else q.delete(key);
    const s = q.toString();
    navigate(s ? `/?${s}` : '/', true);
  };

  const shown = useMemo(() => {
    const [lk, lv] = labelFilter.includes('=') ? labelFilter.split(/=(.*)/s) : [labelFilter, undefined];
    return [...list.values()]
      .filter((w) => !stateFilter || w.state === stateFilter)
      .filter((w) => !lk || (lk in (w.labels ?? {}) && (lv === undefined || w.labels[lk] === lv)))
      .sort((a, b) => a.name.localeCompare(b.name));
  }, [list, stateFilter, labelFilter]);

  return (
    <section>
      <div class="heading">
        <h1>Workspaces</h1>
        <span class={`stream ${stream}`} role="status">
          {stream === 'live' ? 'Live' : stream === 'connecting' ? 'Connecting…' : stream === 'reconnecting' ? 'Reconnecting…' : 'Disconnected'}
        </span>
        <button type="button" onClick={() => { setFromTemplate(undefined); setCreating(true); }}>New workspace</button>
      </div>
      <form class="filters" role="search" onSubmit={(e) => e.preventDefault()}>
        <label>State
          <select value={stateFilter} onChange={(e) => setFilter('state', (e.currentTarget as HTMLSelectElement).value)}>
            <option value="">any</option>
            {kStates.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
        </label>
        <label>Label
          <input type="search" placeholder="team=infra" value={labelFilter}
                 onInput={(e) => setFilter('label', (e.currentTarget as HTMLInputElement).value)} />
        </label>
        <span class="muted">{shown.length} of {list.size}</span>
      </form>
      {error && <ErrorNote message={error} onDismiss={() => setError(null)} />}
      {stream !== 'connecting' && list.size === 0 ? (
        <p class="empty">No workspaces yet. <button type="button" class="link" onClick={() => { setFromTemplate(undefined); setCreating(true); }}>Create one</button>.</p>
      ) : (
        <table class="list">
          <thead>
            <tr><th scope="col">Name</th><th scope="col">State</th><th scope="col">Size</th><th scope="col">Image</th>
              <th scope="col">Idle</th><th scope="col">Labels</th><th scope="col"><span class="sr-only">Actions</span></th></tr>
          </thead>
          <tbody>
            {shown.map((w) => (
              <tr key={w.id} data-workspace={w.name}>
                <td data-label="Name"><a href={`/w/${encodeURIComponent(w.name)}`}>{w.name}</a></td>
                <td data-label="State"><StatePill state={w.state} /> <Progress w={w} now={now} />
                  {w.error && <div class="errtext">{w.error}</div>}</td>
                <td data-label="Size">{w.size} <span class="muted">{w.cpus} vCPU · {w.memory_mib / 1024} GiB · {w.disk_gib} GiB disk</span></td>
                <td data-label="Image">{w.image}</td>
                <td data-label="Idle"><IdleInfo w={w} now={now} /></td>
                <td data-label="Labels">{Object.entries(w.labels ?? {}).map(([k, v]) => (
                  <button type="button" class="tag" key={k} title="Filter by this label"
                          onClick={() => setFilter('label', `${k}=${v}`)}>{k}={v}</button>))}</td>
                <td class="row-actions"><Lifecycle w={w} put={put} onError={setError} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <TemplateList onCreateFrom={(t) => { setFromTemplate(t.name); setCreating(true); }} />
      <Modal title="New workspace" open={creating} onClose={() => setCreating(false)}>
        <CreateForm template={fromTemplate} onCancel={() => setCreating(false)}
                    onCreated={(w) => { put(w); setCreating(false); }} />
      </Modal>
    </section>
  );
}
