// Network: the guest's egress policy (GET/PATCH …/network), applied at once, with the refusal
// counters and the last refused destinations and names.
import { useEffect, useState } from 'preact/hooks';
import { call, errorMessage, wsPath } from './api';
import { ErrorNote, formatBytes, formatTime } from './ui';

interface NetworkStatus {
  egress: 'open' | 'none' | 'allowlist';
  allow: string[];
  isolated: boolean;
  counters?: Record<string, number>;
  refused?: { address: string; port: number; at: string }[];
  refused_names?: { name: string; at: string }[];
}

export function Network({ ws }: { ws: string }) {
  const [net, setNet] = useState<NetworkStatus | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [egress, setEgress] = useState<string>('open');

  const load = async () => {
    try {
      const n = await call<NetworkStatus>('GET', wsPath(ws, '/network'));
      setNet(n);
      setEgress(n.egress);
      setError(null);
    } catch (e) {
      setError(errorMessage(e));
    }
  };
  useEffect(() => void load(), [ws]);

  const save = async (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const allow = String(f.get('allow') ?? '').split(/[\n,]/).map((x) => x.trim()).filter(Boolean);
    setBusy(true);
    setSaved(null);
    try {
      const body = egress === 'allowlist' ? { egress, allow } : { egress };
      const n = await call<NetworkStatus>('PATCH', wsPath(ws, '/network'), { body });
      setNet(n);
      setError(null);
      setSaved('Saved: the policy applies to the running guest now.');
    } catch (err) {
      setError(errorMessage(err));
    } finally {
      setBusy(false);
    }
  };

  if (!net) return error ? <ErrorNote message={error} /> : <p aria-busy="true">Loading…</p>;
  const c = net.counters ?? {};
  return (
    <div class="network">
      {!net.isolated && <p class="errtext">Isolation is off on this host (berthd's config): the policy is kept but not enforced.</p>}
      <form class="netform" onSubmit={save}>
        <fieldset>
          <legend>What the guest may reach</legend>
          {(['open', 'none', 'allowlist'] as const).map((v) => (
            <label class="check" key={v}>
              <input type="radio" name="egress" value={v} checked={egress === v} onChange={() => setEgress(v)} />
              {v === 'open' ? 'the internet (open)' : v === 'none' ? 'nothing (none)' : 'only the names and CIDRs below (allowlist)'}
            </label>
          ))}
        </fieldset>
        <label>Allowed names and CIDRs <span class="muted">(one a line: github.com, *.pypi.org, 203.0.113.0/24)</span>
          <textarea name="allow" rows={5} spellcheck={false} disabled={egress !== 'allowlist'} key={net.allow.join('\n')}
                    defaultValue={net.allow.join('\n')} />
        </label>
        {error && <ErrorNote message={error} onDismiss={() => setError(null)} />}
        {saved && <p role="status">{saved}</p>}
        <div class="buttons"><button type="submit" disabled={busy}>{busy ? 'Saving…' : 'Save policy'}</button>
          <button type="button" class="quiet" onClick={() => void load()}>Refresh</button></div>
      </form>
      <h2>Counters</h2>
      <p class="muted">Since the workspace's rules were installed.</p>
      <dl class="counters">
        <dt>Refused</dt><dd>{c.refused_packets ?? 0} packets, {formatBytes(c.refused_bytes ?? 0)}</dd>
        <dt>Allowed</dt><dd>{c.allowed_packets ?? 0} packets, {formatBytes(c.allowed_bytes ?? 0)}</dd>
        <dt>Names</dt><dd>{c.answered_names ?? 0} answered, {c.refused_names ?? 0} refused, {c.failed_names ?? 0} failed</dd>
      </dl>
      <h2>Recent refusals</h2>
      {(net.refused?.length ?? 0) + (net.refused_names?.length ?? 0) === 0 ? <p class="muted">None in the last hour.</p> : (
        <table class="list">
          <thead><tr><th scope="col">Destination</th><th scope="col">Last refused</th></tr></thead>
          <tbody>
            {net.refused?.map((r) => <tr key={`a${r.address}:${r.port}`}><td data-label="Destination" class="mono">{r.address}:{r.port}</td><td data-label="Last refused">{formatTime(r.at)}</td></tr>)}
            {net.refused_names?.map((r) => <tr key={`n${r.name}`}><td data-label="Destination" class="mono">{r.name} (DNS)</td><td data-label="Last refused">{formatTime(r.at)}</td></tr>)}
          </tbody>
        </table>
      )}
    </div>
  );
}
