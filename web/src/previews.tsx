// Previews: the guest's listening ports (GET …/ports) and the preview links (…/previews):
// open a port for this session, make a link (private with a token, or public), copy it,
// revoke it.
import { useEffect, useState } from 'preact/hooks';
import { call, errorMessage, wsPath } from './api';
import { Confirm, ErrorNote, copyText, formatTime } from './ui';

interface Port {
  port: number;
  address: string;
  family: string;
  process: string | null;
  cmdline: string | null;
  preview_url?: string;
}

interface Preview {
  id: string;
  port: number;
  public: boolean;
  status: 'active' | 'expired' | 'revoked';
  url: string;
  link?: string;
  created_at: string;
  expires_at: string;
  last_used_at: string | null;
}

export function Previews({ ws }: { ws: string }) {
  const [ports, setPorts] = useState<Port[] | null>(null);
  const [previews, setPreviews] = useState<Preview[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [fresh, setFresh] = useState<Preview | null>(null);  // its link (with the token) is shown once
  const [note, setNote] = useState<string | null>(null);
  const [revoking, setRevoking] = useState<Preview | null>(null);

  const load = async () => {
    try {
      const [p, v] = await Promise.all([
        call<{ ports: Port[] }>('GET', wsPath(ws, '/ports')),
        call<{ previews: Preview[] }>('GET', wsPath(ws, '/previews')),
      ]);
      setPorts(p.ports);
      setPreviews(v.previews);
      setError(null);
    } catch (e) {
      setError(errorMessage(e));
    }
  };
  useEffect(() => void load(), [ws]);

  const make = async (port: number, isPublic: boolean) => {
    try {
      const p = await call<Preview>('POST', wsPath(ws, '/previews'), { body: { port, public: isPublic } });
      setFresh(p);
      setNote(null);
      void load();
    } catch (e) {
      setError(errorMessage(e));
    }
  };
  const revoke = async (p: Preview) => {
    setRevoking(null);
    try {
      await call('DELETE', wsPath(ws, `/previews/${encodeURIComponent(p.id)}`));
      void load();
    } catch (e) {
      setError(errorMessage(e));
    }
  };
  // A preview's access is fixed when it is made: switching makes a new link and revokes the old.
  const toggle = async (p: Preview) => {
    try {
      const made = await call<Preview>('POST', wsPath(ws, '/previews'), { body: { port: p.port, public: !p.public } });
      await call('DELETE', wsPath(ws, `/previews/${encodeURIComponent(p.id)}`));
      setFresh(made);
      void load();
    } catch (e) {
      setError(errorMessage(e));
    }
  };
  // Opens a port for this session alone (POST …/ports/{port}/open): no link is made, and what
  // opens it ends with the session. The tab is opened at the click (popup blockers allow only
  // that) and cut from this page before it is sent to the preview's origin.
  const openPort = async (port: number) => {
    const tab = window.open('about:blank', '_blank');
    if (tab) tab.opener = null;
    try {
      const r = await call<{ url: string }>('POST', wsPath(ws, `/ports/${port}/open`));
      if (tab) tab.location.href = r.url;
      else window.location.href = r.url;
    } catch (e) {
      tab?.close();
      setError(errorMessage(e));
    }
  };
  const copyLink = async (text: string) => setNote((await copyText(text)) ? 'Link copied.' : 'Copying failed: select the link and copy it.');

  return (
    <div class="previews">
      <div class="toolbar"><button type="button" class="quiet" onClick={() => void load()}>Refresh</button>
        <form class="inline" onSubmit={(e) => {
          e.preventDefault();
          const f = new FormData(e.currentTarget as HTMLFormElement);
          const port = Number(f.get('port'));
          if (port >= 1 && port <= 65535) void make(port, f.get('public') === 'on');
        }}>
          <label>Port <input name="port" type="number" min="1" max="65535" required class="narrow" /></label>
          <label class="check"><input name="public" type="checkbox" /> public</label>
          <button type="submit">Make a preview link</button>
        </form>
      </div>
      {error && <ErrorNote message={error} onDismiss={() => setError(null)} />}
      {fresh && (
        <div class="fresh" role="status">
          <p>A {fresh.public ? 'public' : 'private'} link to port {fresh.port}, until {formatTime(fresh.expires_at)}.
            {!fresh.public && ' It carries a token and is shown only now: copy it.'}</p>
          <input readOnly value={fresh.link ?? fresh.url} aria-label="Preview link" onFocus={(e) => (e.currentTarget as HTMLInputElement).select()} />
          <div class="buttons">
            <a class="button" href={fresh.link ?? fresh.url} target="_blank" rel="noopener noreferrer">Open</a>
            <button type="button" onClick={() => copyLink(fresh.link ?? fresh.url)}>Copy link</button>
            <button type="button" class="quiet" onClick={() => setFresh(null)}>Done</button>
          </div>
        </div>
      )}
      {note && <p role="status">{note}</p>}
      <h2>Listening ports</h2>
      {ports === null ? <p class="muted">Loading…</p> : ports.length === 0 ? <p class="muted">Nothing listens in the workspace.</p> : (
        <table class="list">
          <thead><tr><th scope="col">Port</th><th scope="col">Address</th><th scope="col">Process</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>{ports.map((p) => (
            <tr key={`${p.address}:${p.port}`}>
              <td data-label="Port">{p.port}</td>
              <td data-label="Address">{p.address}</td>
              <td data-label="Process" class="mono">{p.process ?? '—'}</td>
              <td class="row-actions"><div class="buttons">
                <button type="button" onClick={() => void openPort(p.port)}
                        title="Opens it for you while you are signed in; makes no link">Open</button>
                <button type="button" class="quiet" onClick={() => make(p.port, false)}>Private link</button>
                <button type="button" class="quiet" onClick={() => make(p.port, true)}>Public link</button>
              </div></td>
            </tr>))}
          </tbody>
        </table>
      )}
      <h2>Preview links</h2>
      {previews === null ? <p class="muted">Loading…</p> : previews.length === 0 ? <p class="muted">No preview links yet.</p> : (
        <table class="list">
          <thead><tr><th scope="col">Port</th><th scope="col">Access</th><th scope="col">Status</th><th scope="col">Expires</th><th scope="col">Last used</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>{previews.map((p) => (
            <tr key={p.id}>
              <td data-label="Port">{p.port}</td>
              <td data-label="Access">{p.public ? 'public' : 'private'}</td>
              <td data-label="Status">{p.status}</td>
              <td data-label="Expires">{formatTime(p.expires_at)}</td>
              <td data-label="Last used">{formatTime(p.last_used_at)}</td>
              <td class="row-actions"><div class="buttons">
                {p.status === 'active' && <>
                  <a class="button quiet" href={p.url} target="_blank" rel="noopener noreferrer">Open</a>
                  <button type="button" class="quiet" onClick={() => copyLink(p.url)}
                          title={p.public ? 'The URL opens it' : 'The URL alone needs a token or your key: make a new private link to hand to someone'}>Copy URL</button>
                  <button type="button" class="quiet" onClick={() => toggle(p)}>{p.public ? 'Make private' : 'Make public'}</button>
                  <button type="button" class="quiet danger" onClick={() => setRevoking(p)}>Revoke</button>
                </>}
              </div></td>
            </tr>))}
          </tbody>
        </table>
      )}
      <Confirm open={!!revoking} danger title={`Revoke the link to port ${revoking?.port ?? ''}?`} action="Revoke"
               message="It stops working at once, for everyone who has it." onCancel={() => setRevoking(null)}
               onConfirm={() => revoking && revoke(revoking)} />
    </div>
  );
}
