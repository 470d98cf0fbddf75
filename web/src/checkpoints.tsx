// Checkpoints: the workspace's checkpoints (GET …/checkpoints, newest first) and what can be done
// with one: take one now (of the disks, or with memory while it runs or is hibernated), restore
// it (asking first, and saying whether the state it leaves is kept as an undo checkpoint), fork
// it into new workspaces, publish it as a template, delete it (a 409 names what stands on it),
// see what changed since it (checkpoint_diff.tsx).
// Which workspaces are forks of a checkpoint comes from the live list (`forked_from`).
import type { ComponentChildren } from 'preact';
import { useEffect, useMemo, useState } from 'preact/hooks';
import {
  ApiError, call, checkpointPath, currentSession, errorMessage, listTemplates, wsPath,
  type Checkpoint, type Restored, type Template, type Workspace,
} from './api';
import { DiffPanel } from './checkpoint_diff';
import { navigate } from './router';
import { ErrorNote, Modal, StatePill, ago, formatBytes, formatTime, kNameHint, kNamePattern, useNow } from './ui';

const kMaxForks = 16;  // berthd's kMaxForksAtOnce

/** Who took it, in words (the timeline's actors: a key's id, or `system`). */
function byWhom(actor: string): string {
  if (actor === 'system') return 'berthd';
  if (actor === currentSession()?.key.id) return 'you';
  return actor;
}

/** The names `count` forks called `name` get (berthd: one is `name`, more are `name-1`…). */
export function forkNames(name: string, count: number): string[] {
  if (count <= 1) return [name];
  return Array.from({ length: count }, (_, i) => `${name}-${i + 1}`);
}

/** The checkpoint and every one above it (whose parent chain reaches it): what a fork or a
 * template standing on any of them keeps it from being deleted. */
function atOrAbove(cp: Checkpoint, all: Checkpoint[]): Set<string> {
  const out = new Set([cp.id]);
  for (let grew = true; grew;) {
    grew = false;
    for (const c of all) {
      if (c.parent && out.has(c.parent) && !out.has(c.id)) {
        out.add(c.id);
        grew = true;
      }
    }
  }
  return out;
}

type Dialog =
  | { kind: 'restore'; cp: Checkpoint }
  | { kind: 'delete'; cp: Checkpoint }
  | { kind: 'fork'; cp: Checkpoint }
  | { kind: 'publish'; cp: Checkpoint | null };

export function Checkpoints({ w, workspaces, put }:
  { w: Workspace; workspaces: Map<string, Workspace>; put: (w: Workspace) => void }) {
  const [cps, setCps] = useState<Checkpoint[] | null>(null);
  const [templates, setTemplates] = useState<Template[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [note, setNote] = useState<ComponentChildren>(null);
  const [taking, setTaking] = useState(false);
  const [dialog, setDialog] = useState<Dialog | null>(null);
  const [highlight, setHighlight] = useState<string | null>(null);  // the undo checkpoint a restore named
  const [forked, setForked] = useState<{ from: string; ids: string[] } | null>(null);
  const [diffing, setDiffing] = useState<string | null>(null);  // the checkpoint the diff panel is from
  const now = useNow(10_000);

  const load = async () => {
    try {
      const [c, t] = await Promise.all([
        call<{ checkpoints: Checkpoint[] }>('GET', wsPath(w.id, '/checkpoints')),
        listTemplates(),
      ]);
      setCps(c.checkpoints);
      setTemplates(t.filter((x) => x.workspace_id === w.id));
      setError(null);
    } catch (e) {
      setError(errorMessage(e));
    }
  };
  useEffect(() => void load(), [w.id]);

  const s = w.state;
  const canTake = s === 'running' || s === 'stopped' || s === 'hibernated';
  const canMemory = s === 'running' || s === 'hibernated';

  const take = async (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const f = new FormData(form);
    const name = String(f.get('name') ?? '').trim();
    const memory = canMemory && f.get('memory') === 'on';
    setTaking(true);
    setNote(null);
    try {
      const body: Record<string, unknown> = { memory };
      if (name) body.name = name;
      const c = await call<Checkpoint>('POST', wsPath(w.id, '/checkpoints'), { body });
      form.reset();
      setHighlight(c.id);
      setNote(<>Checkpoint <strong>{c.name}</strong> taken ({c.memory ? 'memory and disks' : 'disks only'}{c.pause_ms ? `; the guest was paused ${c.pause_ms} ms` : ''}).</>);
      setError(null);
      await load();
    } catch (err) {
      setError(`Checkpoint: ${errorMessage(err)}`);
    } finally {
      setTaking(false);
    }
  };

  const byId = useMemo(() => new Map((cps ?? []).map((c) => [c.id, c])), [cps]);
  const diffFrom = diffing ? byId.get(diffing) : undefined;  // gone once it is deleted
  const forksOf = (ids: Set<string>) => [...workspaces.values()]
    .filter((x) => x.forked_from && ids.has(x.forked_from))
    .sort((a, b) => a.name.localeCompare(b.name));

  const restored = (c: Checkpoint, r: Restored) => {
    put(r.workspace);
    setHighlight(r.undo?.id ?? null);
    const undo = r.undo;
    setNote(undo ? (
      <>Restored <strong>{c.name}</strong>. The state it left is kept as checkpoint <strong class="mono">{undo.name}</strong>:{' '}
        <button type="button" class="link" onClick={() => setDialog({ kind: 'restore', cp: undo })}>restore it to undo this restore</button>.</>
    ) : <>Restored <strong>{c.name}</strong>. The state it left was discarded (undo was off).</>);
    void load();
  };

  return (
    <div class="checkpoints">
      <p class="muted intro">
        A checkpoint keeps the workspace's disks as they are now and, with memory, its running processes too. Taking one
        costs milliseconds; it grows only with what the workspace writes afterwards. A restore checkpoints the state it
        leaves first, so it can be undone.
      </p>
      <div class="toolbar">
        <form class="inline" aria-label="Take a checkpoint" onSubmit={take}>
          <label><span>Name <span class="muted">(optional)</span></span>
            <input name="name" maxLength={63} pattern={kNamePattern} title={kNameHint} placeholder="before-upgrade"
                   autoComplete="off" spellcheck={false} /></label>
          <label class="check" title={canMemory ? 'Also the guest\'s memory and processes; the guest is paused briefly'
            : 'Only a running or hibernated workspace has memory to keep'}>
            <input name="memory" type="checkbox" disabled={!canMemory} /> with memory
          </label>
          <button type="submit" disabled={!canTake || taking}>{taking ? 'Taking…' : 'Checkpoint now'}</button>
        </form>
        <div class="buttons push">
          <button type="button" class="quiet" disabled={!canMemory} onClick={() => setDialog({ kind: 'publish', cp: null })}
                  title={canMemory ? 'Takes a checkpoint with memory now and publishes it' : 'Needs a running or hibernated workspace'}>
            Publish as template…</button>
          <button type="button" class="quiet" onClick={() => void load()}>Refresh</button>
        </div>
      </div>
      <p class="muted hint">
        {!canTake ? `Checkpoints are taken of a running, stopped or hibernated workspace; this one is ${s}.`
          : canMemory ? 'With memory, the guest is paused briefly while its memory is saved; without, it runs on and is asked to sync its files first.'
            : 'A stopped workspace has no memory to keep: its checkpoints are of its disks.'}
      </p>
      {error && <ErrorNote message={error} onDismiss={() => setError(null)} />}
      {note && <p role="status" class="note">{note}</p>}
      {forked && (
        <div class="fresh" role="status">
          <p>{forked.ids.length} new workspace{forked.ids.length === 1 ? '' : 's'} forked from <strong>{forked.from}</strong>:</p>
          <ul class="forklist">{forked.ids.map((id) => {
            const f = workspaces.get(id);
            return f && <li key={id}><a href={`/w/${encodeURIComponent(f.name)}`}>{f.name}</a> <StatePill state={f.state} /></li>;
          })}</ul>
          <div class="buttons"><button type="button" class="quiet" onClick={() => setForked(null)}>Done</button></div>
        </div>
      )}
      {cps === null ? (error ? null : <p class="muted" aria-busy="true">Loading…</p>) : cps.length === 0 ? (
        <p class="empty">No checkpoints yet. {canTake ? 'Take one before a risky change: “Checkpoint now”.' : ''}</p>
      ) : (
        <table class="list cplist">
          <thead><tr><th scope="col">Name</th><th scope="col">Created</th><th scope="col">Contents</th><th scope="col">Size</th>
            <th scope="col">Parent</th><th scope="col">Forks</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>{cps.map((c) => {
            const parent = c.parent ? byId.get(c.parent) : undefined;
            const forks = forksOf(new Set([c.id]));
            const tpls = templates.filter((t) => t.checkpoint_id === c.id);
            return (
              <tr key={c.id} data-checkpoint={c.name}
                  class={[c.id === highlight && 'just', c.id === diffing && 'diffing'].filter(Boolean).join(' ') || undefined}>
                <td data-label="Name"><span class="cpname">{c.name}</span>
                  {c.kind === 'before_restore' && <span class="tag kind" title="Taken by a restore, of the state it left: restore it to undo that restore">undo point</span>}
                  {c.kind === 'rolling' && <span class="tag kind" title="Taken on a schedule">rolling</span>}
                  {tpls.map((t) => <span class="tag kind tpl" key={t.id} title="Published as a template">template {t.name}</span>)}
                  {c.name !== c.id && <div class="muted mono small">{c.id}</div>}</td>
                <td data-label="Created"><time dateTime={c.created_at} title={c.created_at}>{formatTime(c.created_at)}</time>
                  <div class="muted small">{ago(c.created_at, now)} · by {byWhom(c.created_by)}</div></td>
                <td data-label="Contents">{c.memory ? 'memory + disks' : 'disks only'}
                  <div class="muted small">taken while {c.taken_while}{c.memory && c.pause_ms ? `, paused ${c.pause_ms} ms` : ''}</div></td>
                <td data-label="Size" class="nowrap">{formatBytes(c.size_bytes)}</td>
                <td data-label="Parent">{c.parent ? <span class="cpname">{parent?.name ?? c.parent}</span> : <span class="muted">the image</span>}</td>
                <td data-label="Forks">{forks.length === 0 ? <span class="muted">—</span> : forks.map((f) => (
                  <a key={f.id} class="forklink" href={`/w/${encodeURIComponent(f.name)}`}>{f.name}</a>))}</td>
                <td class="row-actions"><div class="buttons">
                  <button type="button" onClick={() => setDialog({ kind: 'restore', cp: c })}>Restore</button>
                  <button type="button" class="quiet" onClick={() => setDialog({ kind: 'fork', cp: c })}>Fork</button>
                  <button type="button" class="quiet" title="What changed since this checkpoint" data-diff-of={c.id}
                          aria-expanded={c.id === diffing} aria-controls={c.id === diffing ? 'cp-diff' : undefined}
                          onClick={() => setDiffing(c.id === diffing ? null : c.id)}>Diff</button>
                  {c.memory && <button type="button" class="quiet" title="Publish as a template"
                                       onClick={() => setDialog({ kind: 'publish', cp: c })}>Publish</button>}
                  <button type="button" class="quiet danger" onClick={() => setDialog({ kind: 'delete', cp: c })}>Delete</button>
                </div></td>
              </tr>
            );
          })}</tbody>
        </table>
      )}
      {diffFrom && <DiffPanel key={diffFrom.id} w={w} from={diffFrom} cps={cps ?? []} onClose={() => {
        setDiffing(null);
        // Focus goes back to the row's Diff button, as a dialog's does.
        document.querySelector<HTMLButtonElement>(`button[data-diff-of="${CSS.escape(diffFrom.id)}"]`)?.focus();
      }} />}
      {dialog?.kind === 'restore' && (
        <RestoreDialog key={dialog.cp.id} w={w} cp={dialog.cp} onClose={() => setDialog(null)}
                       onDone={(r) => { const c = dialog.cp; setDialog(null); restored(c, r); }} />
      )}
      {dialog?.kind === 'delete' && (
        <DeleteDialog key={dialog.cp.id} w={w} cp={dialog.cp} onClose={() => setDialog(null)}
                      dependents={{ forks: forksOf(atOrAbove(dialog.cp, cps ?? [])),
                                    templates: templates.filter((t) => atOrAbove(dialog.cp, cps ?? []).has(t.checkpoint_id)) }}
                      onDone={() => {
                        const c = dialog.cp;
                        setDialog(null);
                        setNote(<>Checkpoint <strong>{c.name}</strong> deleted.</>);
                        void load();
                      }} />
      )}
      {dialog?.kind === 'fork' && (
        <ForkDialog key={dialog.cp.id} w={w} cp={dialog.cp} onClose={() => setDialog(null)}
                    onDone={(made) => {
                      const c = dialog.cp;
                      setDialog(null);
                      made.forEach(put);
                      if (made.length === 1) navigate(`/w/${encodeURIComponent(made[0]!.name)}`);
                      else setForked({ from: c.name, ids: made.map((m) => m.id) });
                    }} />
      )}
      {dialog?.kind === 'publish' && (
        <PublishDialog key={dialog.cp?.id ?? 'now'} w={w} cp={dialog.cp} onClose={() => setDialog(null)}
                       onDone={(t) => {
                         setDialog(null);
                         setNote(<>Published template <strong>{t.name}</strong>: a new workspace can start from it (Workspaces, New workspace, from a template).</>);
                         void load();
                       }} />
      )}
    </div>
  );
}

/** What a restore of `cp` does to `w` as it is now, in words. */
function restoreEffect(w: Workspace, cp: Checkpoint): string {
  const when = formatTime(cp.created_at);
  if (cp.memory) {
    return `Its disks and memory go back to ${when}: it starts and resumes the processes that ran then, where they were` +
      (w.state === 'running' ? ' (the processes running now end).' : '.');
  }
  return w.state === 'running'
    ? `It is stopped, its disks go back to ${when}, and it boots again: the processes running now end.`
    : `Its disks go back to ${when}; it stays stopped.`;
}

function RestoreDialog({ w, cp, onClose, onDone }:
  { w: Workspace; cp: Checkpoint; onClose: () => void; onDone: (r: Restored) => void }) {
  const [undo, setUndo] = useState(true);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const restorable = w.state === 'running' || w.state === 'stopped';
  const go = async () => {
    setBusy(true);
    setError(null);
    try {
      onDone(await call<Restored>('POST', checkpointPath(w.id, cp.id, '/restore'), { body: { undo } }));
    } catch (e) {
      setError(errorMessage(e));
      setBusy(false);
    }
  };
  return (
    <Modal title={`Restore ${cp.name}?`} open onClose={onClose}>
      <p>{restoreEffect(w, cp)}</p>
      <label class="check"><input type="checkbox" checked={undo} onChange={(e) => setUndo((e.currentTarget as HTMLInputElement).checked)} />
        Checkpoint the current state first (undo)</label>
      {undo ? (
        <p class="muted">The state the workspace is in now is kept as a checkpoint{w.state === 'running' && cp.memory ? ' with memory' : ''} first:
          restore that one to undo this restore.</p>
      ) : (
        <p class="errtext">Without undo, what {w.name} holds now and no checkpoint keeps is lost.</p>
      )}
      {!restorable && <p class="errtext">{w.name} is {w.state}: a restore needs it running or stopped.</p>}
      {error && <ErrorNote message={error} />}
      <div class="actions">
        <button type="button" class="quiet" onClick={onClose} autoFocus>Cancel</button>
        <button type="button" class={undo ? '' : 'danger'} disabled={busy || !restorable} onClick={() => void go()}>
          {busy ? 'Restoring…' : undo ? 'Restore' : 'Restore and discard'}</button>
      </div>
    </Modal>
  );
}

function DeleteDialog({ w, cp, dependents, onClose, onDone }:
  { w: Workspace; cp: Checkpoint; dependents: { forks: Workspace[]; templates: Template[] };
    onClose: () => void; onDone: () => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<{ message: string; conflict: boolean } | null>(null);
  const go = async () => {
    setBusy(true);
    setError(null);
    try {
      await call('DELETE', checkpointPath(w.id, cp.id));
      onDone();
    } catch (e) {
      setError({ message: errorMessage(e), conflict: e instanceof ApiError && e.status === 409 });
      setBusy(false);
    }
  };
  const blocking = dependents.forks.length + dependents.templates.length > 0;
  return (
    <Modal title={`Delete checkpoint ${cp.name}?`} open onClose={onClose}>
      <p>It can no longer be restored or forked. The checkpoints and disks above it read what they read before (its data is
        merged into them).</p>
      {error && <ErrorNote message={`berthd refused: ${error.message}`} />}
      {error?.conflict && blocking && (
        <div class="blockers">
          <p>Delete these first:</p>
          <ul>
            {dependents.forks.map((f) => <li key={f.id}>workspace <a href={`/w/${encodeURIComponent(f.name)}`}>{f.name}</a> (a fork)</li>)}
            {dependents.templates.map((t) => <li key={t.id}>template <strong>{t.name}</strong> (on the Workspaces page)</li>)}
          </ul>
        </div>
      )}
      <div class="actions">
        <button type="button" class="quiet" onClick={onClose} autoFocus>{error ? 'Close' : 'Cancel'}</button>
        <button type="button" class="danger" disabled={busy} onClick={() => void go()}>{busy ? 'Deleting…' : 'Delete'}</button>
      </div>
    </Modal>
  );
}

function ForkDialog({ w, cp, onClose, onDone }:
  { w: Workspace; cp: Checkpoint; onClose: () => void; onDone: (made: Workspace[]) => void }) {
  const [name, setName] = useState(`${w.name}-fork`);
  const [count, setCount] = useState(1);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const names = forkNames(name || 'NAME', Number.isInteger(count) && count >= 1 ? count : 1);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const body: Record<string, unknown> = { name };
      if (count !== 1) body.count = count;
      const r = await call<{ workspaces: Workspace[] }>('POST', checkpointPath(w.id, cp.id, '/fork'), { body });
      onDone(r.workspaces);
    } catch (err) {
      setError(errorMessage(err));
      setBusy(false);
    }
  };
  return (
    <Modal title={`Fork ${cp.name}`} open onClose={onClose}>
      <form class="create" onSubmit={submit}>
        <p class="muted">Each fork is a new workspace on this checkpoint's disks (nothing is copied) and a machine of its own
          (its own identity, MAC and random seed). {cp.memory ? 'It resumes the checkpoint\'s memory: its processes run at once.'
            : 'It boots from the checkpoint\'s disks.'} It has {w.name}'s image, size, settings and network policy.</p>
        <div class="row2">
          <label>Name <input name="name" required maxLength={57} pattern={kNamePattern} title={kNameHint} autoFocus
                             autoComplete="off" spellcheck={false} value={name}
                             onInput={(e) => setName((e.currentTarget as HTMLInputElement).value.trim())} /></label>
          <label>How many <input name="count" type="number" min={1} max={kMaxForks} step={1} required value={count}
                                 onInput={(e) => setCount(Number((e.currentTarget as HTMLInputElement).value))} /></label>
        </div>
        <p class="muted" aria-live="polite">Makes {names.length === 1 ? names[0] : `${names[0]} … ${names[names.length - 1]}`}.</p>
        {error && <ErrorNote message={error} />}
        <div class="actions">
          <button type="button" class="quiet" onClick={onClose}>Cancel</button>
          <button type="submit" disabled={busy}>{busy ? 'Forking…' : count > 1 ? `Make ${count} forks` : 'Fork'}</button>
        </div>
      </form>
    </Modal>
  );
}

function PublishDialog({ w, cp, onClose, onDone }:
  { w: Workspace; cp: Checkpoint | null; onClose: () => void; onDone: (t: Template) => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    const name = String(new FormData(e.currentTarget as HTMLFormElement).get('name') ?? '').trim();
    setBusy(true);
    setError(null);
    try {
      const from: Record<string, string> = { workspace: w.id };
      if (cp) from.checkpoint = cp.id;
      onDone(await call<Template>('POST', '/v1/templates', { body: { name, from } }));
    } catch (err) {
      setError(errorMessage(err));
      setBusy(false);
    }
  };
  return (
    <Modal title="Publish as template" open onClose={onClose}>
      <form class="create" onSubmit={submit}>
        <p class="muted">
          {cp ? <>From checkpoint <strong>{cp.name}</strong> (with memory). </>
            : <>A checkpoint with memory (<code>template-NAME</code>) is taken of {w.name} now. </>}
          A workspace made from the template resumes with the programs that ran then already running, instead of booting.
        </p>
        <label>Template name <input name="name" required maxLength={63} pattern={kNamePattern} title={kNameHint} autoFocus
                                    autoComplete="off" spellcheck={false} /></label>
        {error && <ErrorNote message={error} />}
        <div class="actions">
          <button type="button" class="quiet" onClick={onClose}>Cancel</button>
          <button type="submit" disabled={busy}>{busy ? 'Publishing…' : 'Publish'}</button>
        </div>
      </form>
    </Modal>
  );
}
