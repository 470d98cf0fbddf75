// Timeline: the workspace's events, then live ones. Filters (kind, actor, since) live in the
// address (?kind=a,b&actor=X&since=ISO) so they survive a reload and can be shared.
//
// The backlog is read in pages (GET …/events?after=N&limit=1000) and then followed
// (?follow=1&after=LAST, NDJSON): a follow alone sends only its first `limit` events of the
// backlog before going live. A dropped stream resumes with ?after= the last id seen, so
// nothing is shown twice or lost. The filters go to berthd as `type=a,b`, `actor=` and
// `since=` (RFC 3339) and are applied here as well, so the page is right whether or not the
// berthd it talks to filters (one that does not ignores the parameters).
import { useEffect, useMemo, useState } from 'preact/hooks';
import { call, currentSession, errorFromText, errorMessage, networkError, wsPath } from './api';
import { navigate } from './router';
import { ErrorNote, formatTime } from './ui';

export interface Event {
  id: number;
  at: string;
  type: string;
  message: string;
  actor?: string | null;
  data?: Record<string, unknown> | null;
}

const kMaxShown = 2000;
const kPage = 1000;

// The kinds berthd writes (docs/api.md); kinds seen in the events are added to the picker.
const kKnownKinds = [
  'created', 'starting', 'started', 'boot_retry', 'stopping', 'stopped', 'stopped_by_idle', 'hibernating',
  'hibernated', 'hibernated_by_idle', 'woken', 'shutdown_by_guest', 'crashed', 'reconciled', 'max_runtime',
  'error', 'updated', 'deleting', 'deleted', 'exec', 'session', 'file_written', 'files_extracted', 'file_moved',
  'file_deleted', 'dir_created',
  'preview_token_used', 'desktop_control_taken', 'desktop_control_released', 'desktop_input', 'egress_denied',
  'checkpoint', 'restored', 'checkpoint_deleted', 'identity',
];

export interface Filters {
  kinds: string[];
  actor: string;
  since: string;  // RFC 3339, or ''
}

export function filtersFrom(query: URLSearchParams): Filters {
  const kinds = (query.get('kind') ?? '').split(',').map((k) => k.trim()).filter(Boolean);
  const since = query.get('since') ?? '';
  return { kinds, actor: query.get('actor') ?? '', since: Number.isFinite(Date.parse(since)) ? since : '' };
}

/** The query berthd gets for these filters (besides after/limit/follow). */
export function filterParams(f: Filters): URLSearchParams {
  const q = new URLSearchParams();
  if (f.kinds.length) q.set('type', f.kinds.join(','));
  if (f.actor) q.set('actor', f.actor);
  if (f.since) q.set('since', f.since);
  return q;
}

export function matches(e: Event, f: Filters): boolean {
  if (f.kinds.length && !f.kinds.includes(e.type)) return false;
  if (f.actor && (e.actor ?? '') !== f.actor) return false;
  if (f.since && !(Date.parse(e.at) >= Date.parse(f.since))) return false;
  return true;
}

/** A time as RFC 3339 in UTC, whole seconds (2026-11-29T21:45:35Z). */
export function rfc3339(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** The value of an <input type="datetime-local"> for a time, in local time. */
function localInput(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

/** Who did it, in words: this session's key, another key, berthd itself, a preview link. */
export function actorLabel(actor: string | null | undefined, keyNames: Map<string, string>): string {
  if (!actor) return '—';
  if (actor === 'system') return 'berthd (system)';
  const me = currentSession()?.key;
  if (me && actor === me.id) return `you (key ${me.prefix}…)`;
  if (actor.startsWith('key_')) return keyNames.get(actor) ?? `key ${actor}`;
  if (actor === 'guest') return 'the guest';
  if (actor === 'preview') return 'a preview link';
  return actor;
}

function str(v: unknown): string | null {
  if (typeof v === 'string') return v;
  if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v.join(' ');
  return null;
}

/** The line under an event's message for kinds whose data says more than the message. */
function summary(e: Event): string | null {
  const d = e.data ?? {};
  if (e.type === 'exec' || e.type === 'session') {
    const parts: string[] = [];
    const cmd = str(d.cmd) ?? str(d.command);
    if (cmd) parts.push(`$ ${cmd}`);
    if (typeof d.exit_code === 'number') parts.push(`exit ${d.exit_code}${typeof d.signal === 'string' ? ` (${d.signal})` : ''}`);
    if (typeof d.duration_ms === 'number') parts.push(`${d.duration_ms} ms`);
    return parts.length ? parts.join(' · ') : null;
  }
  if (e.type === 'file_moved') {
    const from = str(d.path) ?? str(d.from);
    const to = str(d.to);
    return from && to ? `${from} → ${to}` : from;
  }
  if (e.type === 'file_written' || e.type === 'file_deleted' || e.type === 'dir_created' ||
      e.type === 'files_extracted') return str(d.path);
  return null;
}

const kLastVisit = (ws: string) => `berth.timeline.visit.${ws}`;

export function Timeline({ ws, query, base }: { ws: string; query: URLSearchParams; base: string }) {
  const filters = filtersFrom(query);
  const serverQuery = filterParams(filters).toString();
  const [events, setEvents] = useState<Event[]>([]);
  const [kindsSeen, setKindsSeen] = useState<Set<string>>(new Set());
  const [actorsSeen, setActorsSeen] = useState<Set<string>>(new Set());
  const [state, setState] = useState<'connecting' | 'live' | 'reconnecting'>('connecting');
  const [error, setError] = useState<string | null>(null);
  const [text, setText] = useState('');
  const [keyNames, setKeyNames] = useState<Map<string, string>>(new Map());
  // When this timeline was last open in this browser (not a secret: kept in localStorage).
  const [lastVisit] = useState(() => {
    try {
      return window.localStorage.getItem(kLastVisit(ws));
    } catch {
      return null;
    }
  });
  useEffect(() => {
    const mark = () => { try { window.localStorage.setItem(kLastVisit(ws), rfc3339(Date.now())); } catch { /* private mode */ } };
    window.addEventListener('pagehide', mark);
    return () => { mark(); window.removeEventListener('pagehide', mark); };
  }, [ws]);

  // Names for key ids, when this key may list keys (admin scope and up).
  useEffect(() => {
    const scope = currentSession()?.key.scope;
    if (scope !== 'admin' && scope !== 'operator') return;
    call<{ keys: { id: string; prefix: string; name: string }[] }>('GET', '/v1/keys')
      .then(({ keys }) => setKeyNames(new Map(keys.map((k) => [k.id, `key ${k.prefix}…${k.name ? ` (${k.name})` : ''}`]))))
      .catch(() => { /* the ids stand */ });
  }, []);

  useEffect(() => {
    const abort = new AbortController();
    const f = filtersFrom(new URLSearchParams(query));
    let last = 0;
    let retry = 0;
    setEvents([]);
    setState('connecting');
    const take = (batch: Event[]) => {
      const fresh: Event[] = [];
      for (const e of batch) {
        if (typeof e?.id !== 'number' || e.id <= last) continue;  // keepalive lines have no id
        last = e.id;
        fresh.push(e);
      }
      if (!fresh.length) return;
      setKindsSeen((old) => (fresh.every((e) => old.has(e.type)) ? old : new Set([...old, ...fresh.map((e) => e.type)])));
      setActorsSeen((old) => (fresh.every((e) => !e.actor || old.has(e.actor)) ? old
        : new Set([...old, ...fresh.flatMap((e) => (e.actor ? [e.actor] : []))])));
      const shown = fresh.filter((e) => matches(e, f));
      if (shown.length) setEvents((old) => [...shown.reverse(), ...old].slice(0, kMaxShown));
    };
    const get = async (url: string, accept: string) => {
      const r = await fetch(url, { headers: { Accept: accept }, signal: abort.signal, credentials: 'same-origin' })
        .catch((e) => { throw abort.signal.aborted ? e : networkError(e); });
      if (!r.ok) {
        const err = errorFromText(r.status, r.statusText, await r.text());
        if (r.status === 400 || r.status === 401 || r.status === 403 || r.status === 404) throw Object.assign(err, { final: true });
        throw err;
      }
      return r;
    };
    const run = async () => {
      while (!abort.signal.aborted) {
        try {
          // The backlog, a page at a time.
          for (;;) {
            const q = new URLSearchParams(serverQuery);
            q.set('after', String(last));
            q.set('limit', String(kPage));
            const r = await get(`${wsPath(ws, '/events')}?${q}`, 'application/json');
            const page = ((await r.json()) as { events?: Event[] }).events ?? [];
            take(page);
            if (page.length < kPage) break;
          }
          const q = new URLSearchParams(serverQuery);
          q.set('follow', '1');
          if (last) q.set('after', String(last));
          const r = await get(`${wsPath(ws, '/events')}?${q}`, 'application/x-ndjson');
          setState('live');
          setError(null);
          retry = 0;
          const reader = r.body!.pipeThrough(new TextDecoderStream()).getReader();
          let buffered = '';
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buffered += value;
            const lines = buffered.split('\n');
            buffered = lines.pop() ?? '';
            const batch: Event[] = [];
            for (const line of lines) {
              if (!line.trim()) continue;
              try { batch.push(JSON.parse(line) as Event); } catch { /* not an event */ }
            }
            take(batch);
          }
        } catch (e) {
          if (abort.signal.aborted) return;
          setError(errorMessage(e));
          if ((e as { final?: boolean }).final) return;
        }
        if (abort.signal.aborted) return;
        setState('reconnecting');
        retry += 1;
        await new Promise((res) => window.setTimeout(res, Math.min(1000 * 2 ** Math.min(retry, 4), 15000)));
      }
    };
    void run();
    return () => abort.abort();
  }, [ws, serverQuery]);

  const setFilter = (key: string, value: string) => {
    const q = new URLSearchParams(query);
    if (value) q.set(key, value);
    else q.delete(key);
    const s = q.toString();
    navigate(`${base}/timeline${s ? `?${s}` : ''}`, true);
  };
  const toggleKind = (kind: string, on: boolean) => {
    const next = on ? [...filters.kinds, kind] : filters.kinds.filter((k) => k !== kind);
    setFilter('kind', next.join(','));
  };

  const shown = useMemo(() => {
    const t = text.trim().toLowerCase();
    return t ? events.filter((e) => e.type.toLowerCase().includes(t) || e.message.toLowerCase().includes(t)) : events;
  }, [events, text]);
  const kinds = [...new Set([...kKnownKinds, ...kindsSeen, ...filters.kinds])];
  const seenFirst = [...kinds.filter((k) => kindsSeen.has(k)).sort(), ...kinds.filter((k) => !kindsSeen.has(k))];
  const actors = [...new Set([...actorsSeen, ...(filters.actor ? [filters.actor] : [])])].sort();
  const filtered = filters.kinds.length > 0 || !!filters.actor || !!filters.since || !!text.trim();

  return (
    <div class="timeline">
      <form class="toolbar" role="search" aria-label="Filter the timeline" onSubmit={(e) => e.preventDefault()}>
        <details class="multi">
          <summary>Kinds: {filters.kinds.length ? filters.kinds.join(', ') : 'all'}</summary>
          <fieldset>
            <legend class="sr-only">Kinds of events to show</legend>
            {seenFirst.map((k) => (
              <label class="check" key={k}>
                <input type="checkbox" name="kind" value={k} checked={filters.kinds.includes(k)}
                       onChange={(e) => toggleKind(k, (e.currentTarget as HTMLInputElement).checked)} />
                <span class={kindsSeen.has(k) ? '' : 'muted'}>{k}</span>
              </label>
            ))}
          </fieldset>
        </details>
        <label>Actor
          <select value={filters.actor} onChange={(e) => setFilter('actor', (e.currentTarget as HTMLSelectElement).value)}>
            <option value="">anyone</option>
            {actors.map((a) => <option key={a} value={a}>{actorLabel(a, keyNames)}</option>)}
          </select>
        </label>
        <label>Since
          <input type="datetime-local" value={localInput(filters.since)}
                 onChange={(e) => {
                   const v = (e.currentTarget as HTMLInputElement).value;
                   const ms = Date.parse(v);  // a local time without a zone
                   setFilter('since', v && Number.isFinite(ms) ? rfc3339(ms) : '');
                 }} />
        </label>
        <div class="buttons">
          <button type="button" class="quiet" onClick={() => setFilter('since', rfc3339(Date.now() - 3600_000))}>Last hour</button>
          {lastVisit && (
            <button type="button" class="quiet" onClick={() => setFilter('since', lastVisit)}
                    title={`Since ${formatTime(lastVisit)}`}>Since my last visit</button>
          )}
        </div>
        <label>Text <input type="search" value={text} placeholder="in kind or message"
                           onInput={(e) => setText((e.currentTarget as HTMLInputElement).value)} /></label>
        {filtered && (
          <button type="button" class="quiet" onClick={() => { setText(''); navigate(`${base}/timeline`, true); }}>Clear filters</button>
        )}
        <span class={`stream ${state}`} role="status">{state === 'live' ? 'Live' : state === 'connecting' ? 'Connecting…' : 'Reconnecting…'}</span>
      </form>
      {error && <ErrorNote message={error} />}
      {shown.length === 0 && state === 'live' && <p class="muted">No events{filtered ? ' match the filters' : ''}.</p>}
      <ol class="events" aria-live="polite" aria-relevant="additions" aria-label="Events, newest first">
        {shown.map((e) => {
          const line = summary(e);
          return (
            <li key={e.id} class={`ev ev-${e.type}`} data-event-type={e.type} data-actor={e.actor ?? ''}>
              <time dateTime={e.at}>{formatTime(e.at)}</time>
              <span class="evtype">{e.type}</span>
              <span class="evmsg">{e.message}{line && <code class="evline">{line}</code>}</span>
              <span class="evactor" title={e.actor ?? undefined}>{actorLabel(e.actor, keyNames)}</span>
              {e.data && Object.keys(e.data).length > 0 && (
                <details><summary>details</summary><pre>{JSON.stringify(e.data, null, 2)}</pre></details>
              )}
            </li>
          );
        })}
      </ol>
    </div>
  );
}
