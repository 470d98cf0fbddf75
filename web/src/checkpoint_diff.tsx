// What changed since a checkpoint (GET …/checkpoints/{cp}/diff): the Checkpoints tab's panel under
// its list. The 'to' side is the workspace now or another of its checkpoints. berthd starts a
// stopped or hibernated workspace first and the guest walks /workspace and the home directory,
// so an answer can take a while: the panel says so and counts the seconds; closing it, or asking
// for another 'to', drops the request in flight.
import { useEffect, useRef, useState } from 'preact/hooks';
import {
  diffCheckpoint, errorMessage, type Checkpoint, type CheckpointDiff, type FileChange, type Workspace,
} from './api';
import { ErrorNote, formatBytes, formatTime } from './ui';

const kCurrent = 'current';  // berthd's name for the workspace as it is now, as the 'to' side
// Files a list: berthd's default. A longer list is cut (and marked truncated); its count goes on.
const kMaxEntries = 1000;

type Phase =
  | { kind: 'busy'; started: number }
  | { kind: 'error'; message: string }
  | { kind: 'done'; diff: CheckpointDiff };

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** Seconds since `since`, ticking while it is shown. */
function Elapsed({ since }: { since: number }) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = window.setInterval(() => setNow(Date.now()), 1000);
    return () => window.clearInterval(t);
  }, []);
  return <>{Math.max(0, Math.floor((now - since) / 1000))} s</>;
}

export function DiffPanel({ w, from, cps, onClose }:
  { w: Workspace; from: Checkpoint; cps: Checkpoint[]; onClose: () => void }) {
  const [to, setTo] = useState(kCurrent);
  const [run, setRun] = useState(0);  // "Compare again" asks once more
  const [phase, setPhase] = useState<Phase>({ kind: 'busy', started: Date.now() });
  const heading = useRef<HTMLHeadingElement>(null);

  useEffect(() => heading.current?.focus(), []);
  useEffect(() => {
    const abort = new AbortController();
    setPhase({ kind: 'busy', started: Date.now() });
    diffCheckpoint(w.id, from.id, to, kMaxEntries, abort.signal).then(
      (diff) => { if (!abort.signal.aborted) setPhase({ kind: 'done', diff }); },
      (e) => { if (!abort.signal.aborted) setPhase({ kind: 'error', message: errorMessage(e) }); });
    return () => abort.abort();
  }, [w.id, from.id, to, run]);

  const others = cps.filter((c) => c.id !== from.id);
  const toName = to === kCurrent ? 'now' : others.find((c) => c.id === to)?.name ?? to;
  const wakes = w.state !== 'running';

  return (
    <section class="diff" id="cp-diff" aria-labelledby="cp-diff-title">
      <div class="heading sub">
        <h2 id="cp-diff-title" ref={heading} tabIndex={-1}>Changes since <span class="cpname">{from.name}</span></h2>
        <label class="tofield">Compared with
          <select name="to" value={to} onChange={(e) => setTo((e.currentTarget as HTMLSelectElement).value)}>
            <option value={kCurrent}>now (the workspace as it is)</option>
            {others.map((c) => <option key={c.id} value={c.id}>{c.name} ({formatTime(c.created_at)})</option>)}
          </select></label>
        <div class="buttons">
          <button type="button" class="quiet" disabled={phase.kind === 'busy'} onClick={() => setRun((n) => n + 1)}>
            Compare again</button>
          <button type="button" class="quiet" onClick={onClose}>Close</button>
        </div>
      </div>
      {phase.kind === 'busy' && (
        <div class="diffbusy" aria-busy="true">
          <p role="status"><span class="spinner" aria-hidden="true" /> Comparing <strong>{from.name}</strong> with{' '}
            <strong>{toName}</strong>… <span class="muted" aria-hidden="true"><Elapsed since={phase.started} /></span></p>
          <p class="muted small">
            {wakes ? `${w.name} is ${w.state}: berthd starts it first, then the guest` : 'The guest'} walks the files under
            /workspace and the home directory, and reads its package list. With many files this takes a while.
          </p>
        </div>
      )}
      {phase.kind === 'error' && (
        <>
          <ErrorNote message={`Could not compare: ${phase.message}`} />
          <div class="buttons"><button type="button" onClick={() => setRun((n) => n + 1)}>Try again</button></div>
        </>
      )}
      {phase.kind === 'done' && <DiffAnswer diff={phase.diff} fromName={from.name} toName={toName} />}
    </section>
  );
}

const kGroups = ['added', 'changed', 'removed'] as const;
const kPackageLists = ['installed', 'changed', 'removed'] as const;

function DiffAnswer({ diff, fromName, toName }: { diff: CheckpointDiff; fromName: string; toName: string }) {
  const { files, packages } = diff;
  const counts = files.counts;
  const total = counts.added + counts.changed + counts.removed;
  const nPackages = packages.installed.length + packages.changed.length + packages.removed.length;
  const cut = kGroups.filter((g) => files[g].length < counts[g]);
  const where = diff.paths.length > 0 ? diff.paths.join(' and ') : 'the workspace';
  return (
    <div class="diffanswer">
      <p class="diffsum">
        From <strong>{fromName}</strong> to <strong>{toName}</strong>:{' '}
        {kGroups.map((g, i) => <span key={g}>{i > 0 && ', '}<strong>{counts[g]}</strong> {g}</span>)}{' '}
        in{' '}
        {diff.paths.length === 0 ? 'the workspace' : diff.paths.map((p, i) => <span key={p}>{i > 0 && ' and '}<code>{p}</code></span>)}
        {'; '}{nPackages === 0 ? 'no package installed, changed or removed' : kPackageLists
          .filter((k) => packages[k].length > 0).map((k) => `${packages[k].length} ${k}`).join(', ')
          + (nPackages === 1 ? ' package' : ' packages')}.
        {' '}<span class="muted">Compared in {(diff.took_ms / 1000).toFixed(1)} s.</span>
      </p>
      {files.truncated && (
        <p class="diffcut" role="note"><strong>Not everything is listed.</strong>{' '}
          {cut.length > 0
            ? <>A list stops at {kMaxEntries} entries ({cut.map((g) => `${g}: ${files[g].length} of ${counts[g]} shown`).join('; ')}).
                If the guest also ran out of time, the counts too are only of what it compared.</>
            : <>The guest stopped walking at its time limit: the lists and the counts are only of what it compared, and more may
                have changed.</>}
        </p>
      )}
      <h3>Files</h3>
      {total === 0 ? (
        <p class="muted">{files.truncated ? 'No change found in what was compared.' : `Nothing added, changed or removed under ${where}.`}</p>
      ) : kGroups.map((g) => counts[g] > 0 && (
        <details class={`diffgroup d-${g}`} open key={g}>
          <summary>{g[0]!.toUpperCase() + g.slice(1)} <span class="count">{counts[g]}</span></summary>
          <table class="list difflist files">
            <thead><tr><th scope="col">Path</th><th scope="col">Type</th><th scope="col">Size</th></tr></thead>
            <tbody>{files[g].map((f) => <FileRow key={f.path} f={f} />)}</tbody>
          </table>
        </details>
      ))}
      <h3>Debian packages</h3>
      {nPackages === 0 ? <p class="muted">None installed, changed or removed.</p> : (
        <>
          {packages.installed.length > 0 && (
            <PackageGroup kind="added" title="Installed" count={packages.installed.length} head="Version"
                          rows={packages.installed.map((p) => [p.name, p.version])} />
          )}
          {packages.changed.length > 0 && (
            <PackageGroup kind="changed" title="Changed" count={packages.changed.length} head="From → to"
                          rows={packages.changed.map((p) => [p.name, `${p.from} → ${p.to}`])} />
          )}
          {packages.removed.length > 0 && (
            <PackageGroup kind="removed" title="Removed" count={packages.removed.length} head="Version"
                          rows={packages.removed.map((p) => [p.name, p.version])} />
          )}
        </>
      )}
    </div>
  );
}

const kTypeWords: Record<string, string> = { file: 'file', dir: 'directory', symlink: 'link', other: 'other' };

function FileRow({ f }: { f: FileChange }) {
  // A directory added or removed whole is one row: what it holds, counted.
  const size = f.type === 'dir' && f.entries !== undefined
    ? `${plural(f.entries, 'entry', 'entries')}${f.size > 0 ? ` · ${formatBytes(f.size)}` : ''}`
    : f.type === 'file' ? formatBytes(f.size) : null;
  return (
    <tr>
      <td data-label="Path" class="path"><span class="mono">{f.path}</span></td>
      <td data-label="Type">{kTypeWords[f.type] ?? f.type}</td>
      <td data-label="Size" class="nowrap">{size ?? <span class="muted">—</span>}</td>
    </tr>
  );
}

function PackageGroup({ kind, title, count, head, rows }:
  { kind: string; title: string; count: number; head: string; rows: [string, string][] }) {
  return (
    <details class={`diffgroup d-${kind}`} open>
      <summary>{title} <span class="count">{count}</span></summary>
      <table class="list difflist pkgs">
        <thead><tr><th scope="col">Package</th><th scope="col">{head}</th></tr></thead>
        <tbody>{rows.map(([name, version]) => (
          <tr key={name}>
            <td data-label="Package"><span class="mono">{name}</span></td>
            <td data-label={head}><span class="mono">{version}</span></td>
          </tr>
        ))}</tbody>
      </table>
    </details>
  );
}
