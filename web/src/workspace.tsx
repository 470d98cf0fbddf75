// A workspace's page: its state and actions, and the tabs. A tab once opened stays mounted
// (hidden when another is shown), so a terminal keeps its connection while you look at files.
import { useEffect, useRef, useState } from 'preact/hooks';
import { call, errorMessage, wsPath, type Workspace } from './api';
import { ErrorNote, StatePill, useNow } from './ui';
import { IdleInfo, Lifecycle, Progress, useWorkspaces } from './workspaces';
import { Files } from './files';
import { Timeline } from './timeline';
import { Previews } from './previews';
import { Network } from './network';
import { Checkpoints } from './checkpoints';

// xterm.js is most of the page's weight: loaded with the first terminal, not on first load.
type TerminalsModule = typeof import('./terminal');
let terminalsModule: Promise<TerminalsModule> | null = null;

function LazyTerminals(props: { ws: string; visible: boolean }) {
  const [mod, setMod] = useState<TerminalsModule | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    terminalsModule ??= import('./terminal');
    terminalsModule.then(setMod).catch((e) => {
      terminalsModule = null;
      setError(`The terminal could not be loaded (${errorMessage(e)}); reload the page.`);
    });
  }, []);
  if (error) return <ErrorNote message={error} />;
  return mod ? <mod.Terminals {...props} /> : <p aria-busy="true">Loading the terminal…</p>;
}

// noVNC too: loaded with the first look at the desktop.
type DesktopModule = typeof import('./desktop');
let desktopModule: Promise<DesktopModule> | null = null;

function LazyDesktop(props: { ws: string; state: string; visible: boolean; onStart: () => Promise<void> }) {
  const [mod, setMod] = useState<DesktopModule | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    desktopModule ??= import('./desktop');
    desktopModule.then(setMod).catch((e) => {
      desktopModule = null;
      setError(`The desktop viewer could not be loaded (${errorMessage(e)}); reload the page.`);
    });
  }, []);
  if (error) return <ErrorNote message={error} />;
  return mod ? <mod.DesktopTab {...props} /> : <p aria-busy="true">Loading the desktop viewer…</p>;
}

const kTabs: [string, string][] = [['terminal', 'Terminal'], ['files', 'Files'], ['desktop', 'Desktop'], ['timeline', 'Timeline'], ['previews', 'Previews'], ['network', 'Network'], ['checkpoints', 'Checkpoints']];

export function WorkspacePage({ ws, tab, query }: { ws: string; tab: string; query: URLSearchParams }) {
  const { list, put } = useWorkspaces();
  const [fetched, setFetched] = useState<Workspace | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [visited, setVisited] = useState<Set<string>>(new Set([tab]));
  const now = useNow();
  const tabsRef = useRef<HTMLElement>(null);

  useEffect(() => {
    call<Workspace>('GET', wsPath(ws)).then(setFetched).catch((e) => setError(errorMessage(e)));
  }, [ws]);
  useEffect(() => {
    setVisited((v) => (v.has(tab) ? v : new Set(v).add(tab)));
  }, [tab]);
  useEffect(() => {
    document.title = `${ws} · ${kTabs.find(([t]) => t === tab)?.[1] ?? tab} · Berth`;
  }, [ws, tab]);

  const live = [...list.values()].find((w) => w.name === ws || w.id === ws);
  const w = live ?? fetched;
  // On a narrow screen the tabs scroll sideways: the current one is scrolled into sight.
  useEffect(() => {
    const nav = tabsRef.current;
    const a = nav?.querySelector<HTMLElement>('a[aria-current="page"]');
    if (!nav || !a) return;
    const left = a.getBoundingClientRect().left - nav.getBoundingClientRect().left;
    if (left < 0 || left + a.offsetWidth > nav.clientWidth) nav.scrollLeft += left - (nav.clientWidth - a.offsetWidth) / 2;
  }, [tab, !!w]);
  if (!w) {
    return error ? (
      <section><h1>{ws}</h1><ErrorNote message={error} /><p><a href="/">Back to workspaces</a></p></section>
    ) : <section aria-busy="true"><h1>{ws}</h1><p>Loading…</p></section>;
  }
  const base = `/w/${encodeURIComponent(w.name)}`;
  return (
    <section class="workspace">
      <nav aria-label="Breadcrumb" class="crumbs"><a href="/">Workspaces</a> / </nav>
      <div class="heading">
        <h1>{w.name}</h1>
        <StatePill state={w.state} />
        <Progress w={w} now={now} />
        <Lifecycle w={w} put={put} onError={setError} compact />
      </div>
      <p class="facts">
        <span>{w.image}</span> · <span>{w.size} ({w.cpus} vCPU, {w.memory_mib} MiB, {w.disk_gib} GiB)</span> ·{' '}
        <IdleInfo w={w} now={now} />
        {w.forked_from && <> · <span>fork of checkpoint <span class="mono">{w.forked_from}</span></span></>}
        {w.error && <span class="errtext"> · {w.error}</span>}
      </p>
      {error && <ErrorNote message={error} onDismiss={() => setError(null)} />}
      <nav class="tabs" aria-label="Workspace sections" ref={tabsRef}>
        {kTabs.map(([t, label]) => (
          <a key={t} href={`${base}/${t}`} aria-current={t === tab ? 'page' : undefined}>{label}</a>
        ))}
      </nav>
      {!kTabs.some(([t]) => t === tab) && <p>There is no tab “{tab}”.</p>}
      {visited.has('terminal') && <div hidden={tab !== 'terminal'}><LazyTerminals ws={w.id} visible={tab === 'terminal'} /></div>}
      {visited.has('files') && <div hidden={tab !== 'files'}><Files ws={w.id} base={base} path={query.get('path') ?? '/workspace'} file={query.get('file')} /></div>}
      {visited.has('desktop') && <div hidden={tab !== 'desktop'}>
        <LazyDesktop ws={w.id} state={w.state} visible={tab === 'desktop'} onStart={async () => {
          const answer = await call<Workspace>('POST', wsPath(w.id, '/start'));
          if (answer?.id) put(answer);
        }} /></div>}
      {visited.has('timeline') && <div hidden={tab !== 'timeline'}><Timeline ws={w.id} query={query} base={base} /></div>}
      {visited.has('previews') && <div hidden={tab !== 'previews'}><Previews ws={w.id} /></div>}
      {visited.has('network') && <div hidden={tab !== 'network'}><Network ws={w.id} /></div>}
      {visited.has('checkpoints') && <div hidden={tab !== 'checkpoints'}><Checkpoints w={w} workspaces={list} put={put} /></div>}
    </section>
  );
}
