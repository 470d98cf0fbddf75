// Timeline: GET …/events?follow=1, an NDJSON stream of the workspace's events, then live ones.
// A dropped stream resumes with ?after= the last id seen, so nothing is shown twice or lost.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { errorFromText, errorMessage, networkError, wsPath } from './api';
import { ErrorNote, formatTime } from './ui';

interface Event {
  id: number;
  at: string;
  type: string;
  message: string;
  data?: Record<string, unknown> | null;
}

const kMaxShown = 2000;

export function Timeline({ ws }: { ws: string }) {
  const [events, setEvents] = useState<Event[]>([]);
  const [state, setState] = useState<'connecting' | 'live' | 'reconnecting'>('connecting');
  const [error, setError] = useState<string | null>(null);
  const [filter, setFilter] = useState('');

  useEffect(() => {
    const abort = new AbortController();
    let last = 0;
    let retry = 0;
    const run = async () => {
      while (!abort.signal.aborted) {
        try {
          const r = await fetch(`${wsPath(ws, '/events')}?follow=1${last ? `&after=${last}` : ''}`,
                                { headers: { Accept: 'application/x-ndjson' }, signal: abort.signal, credentials: 'same-origin' })
            .catch((e) => { throw abort.signal.aborted ? e : networkError(e); });
          if (!r.ok) {
            const err = errorFromText(r.status, r.statusText, await r.text());
            if (r.status === 401 || r.status === 403 || r.status === 404) {
              setError(err.message);
              return;
            }
            throw err;
          }
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
            const fresh: Event[] = [];
            for (const line of lines) {
              if (!line.trim()) continue;
              let e: Partial<Event> & { type?: string };
              try { e = JSON.parse(line); } catch { continue; }
              if (typeof e.id !== 'number' || e.id <= last) continue;  // keepalive lines have no id
              last = e.id;
              fresh.push(e as Event);
            }
            if (fresh.length) setEvents((old) => [...fresh.reverse(), ...old].slice(0, kMaxShown));
          }
        } catch (e) {
          if (abort.signal.aborted) return;
          setError(errorMessage(e));
        }
        if (abort.signal.aborted) return;
        setState('reconnecting');
        retry += 1;
        await new Promise((res) => window.setTimeout(res, Math.min(1000 * 2 ** Math.min(retry, 4), 15000)));
      }
    };
    void run();
    return () => abort.abort();
  }, [ws]);

  const shown = useMemo(() => {
    const f = filter.trim().toLowerCase();
    return f ? events.filter((e) => e.type.toLowerCase().includes(f) || e.message.toLowerCase().includes(f)) : events;
  }, [events, filter]);

  return (
    <div class="timeline">
      <div class="toolbar">
        <label>Filter <input type="search" value={filter} placeholder="type or text"
                             onInput={(e) => setFilter((e.currentTarget as HTMLInputElement).value)} /></label>
        <span class={`stream ${state}`} role="status">{state === 'live' ? 'Live' : state === 'connecting' ? 'Connecting…' : 'Reconnecting…'}</span>
      </div>
      {error && <ErrorNote message={error} />}
      {shown.length === 0 && state === 'live' && <p class="muted">No events{filter ? ' match the filter' : ''}.</p>}
      <ol class="events" aria-live="polite" aria-relevant="additions">
        {shown.map((e) => (
          <li key={e.id} class={`ev ev-${e.type}`} data-event-type={e.type}>
            <time dateTime={e.at}>{formatTime(e.at)}</time>
            <span class="evtype">{e.type}</span>
            <span class="evmsg">{e.message}</span>
            {e.data && Object.keys(e.data).length > 0 && (
              <details><summary>details</summary><pre>{JSON.stringify(e.data, null, 2)}</pre></details>
            )}
          </li>
        ))}
      </ol>
    </div>
  );
}
