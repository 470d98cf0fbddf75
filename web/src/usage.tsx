// Usage: seconds and vCPU-seconds per workspace over a range (GET /v1/usage), as bars.
import { useEffect, useState } from 'preact/hooks';
import { call, errorMessage } from './api';
import { ErrorNote, formatDuration, formatTime } from './ui';

interface Usage {
  from: string;
  to: string;
  workspaces: { workspace: string; name: string; size: string; seconds: number; vcpu_seconds: number }[];
  total: { seconds: number; vcpu_seconds: number };
}

const kRanges: [string, string, number][] = [['24h', 'last 24 hours', 86400], ['7d', 'last 7 days', 7 * 86400], ['30d', 'last 30 days', 30 * 86400]];

export function UsagePage({ query }: { query: URLSearchParams }) {
  const range = kRanges.find(([k]) => k === query.get('range')) ?? kRanges[2]!;
  const [usage, setUsage] = useState<Usage | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const to = Math.floor(Date.now() / 1000);
    setUsage(null);
    call<Usage>('GET', `/v1/usage?from=${to - range[2]}&to=${to}`).then(setUsage).catch((e) => setError(errorMessage(e)));
  }, [range[0]]);
  const max = Math.max(1, ...(usage?.workspaces.map((w) => w.vcpu_seconds) ?? []));
  return (
    <section>
      <div class="heading"><h1>Usage</h1></div>
      <nav class="tabs" aria-label="Range">
        {kRanges.map(([k, label]) => <a key={k} href={`/usage?range=${k}`} aria-current={k === range[0] ? 'page' : undefined}>{label}</a>)}
      </nav>
      {error && <ErrorNote message={error} />}
      {!usage ? <p aria-busy="true">Loading…</p> : (
        <>
          <p>{formatTime(usage.from)} to {formatTime(usage.to)}: <strong>{formatDuration(usage.total.seconds)}</strong> of running time,{' '}
            <strong>{formatDuration(usage.total.vcpu_seconds)}</strong> of vCPU time.</p>
          {usage.workspaces.length === 0 ? <p class="muted">Nothing ran in this range.</p> : (
            <table class="list usage">
              <thead><tr><th scope="col">Workspace</th><th scope="col">Size</th><th scope="col">Running</th><th scope="col">vCPU time</th></tr></thead>
              <tbody>
                {[...usage.workspaces].sort((a, b) => b.vcpu_seconds - a.vcpu_seconds).map((w) => (
                  <tr key={w.workspace}>
                    <td data-label="Workspace">{w.name}</td>
                    <td data-label="Size">{w.size}</td>
                    <td data-label="Running">{formatDuration(w.seconds)}</td>
                    <td data-label="vCPU time">
                      <div class="bar" aria-hidden="true"><span style={{ width: `${(100 * w.vcpu_seconds) / max}%` }} /></div>
                      {formatDuration(w.vcpu_seconds)}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </>
      )}
    </section>
  );
}
