// Admin pages: API keys (admin scope: its own tenant's; operator: every tenant's) and tenants
// (operator). A new key is shown once, in the dialog that made it, with a copy button; closing
// the dialog forgets it. Revoking asks first, and says so when it is the key of this session.
// The pages' nav entries are hidden from lower scopes; opened by address they say what scope
// they need instead of calling the API.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { call, errorMessage, type Session } from './api';
import { navigate } from './router';
import { Confirm, ErrorNote, Modal, copyText, formatTime } from './ui';

export const kScopes = ['read', 'write', 'admin', 'operator'] as const;
export type Scope = (typeof kScopes)[number];

/** Whether a key of scope `have` may do what needs `need` (each scope allows all below it). */
export function allows(have: string, need: Scope): boolean {
  return kScopes.indexOf(have as Scope) >= kScopes.indexOf(need);
}

const kScopeHelp: Record<Scope, string> = {
  read: 'read: looks, changes nothing',
  write: "write: everything on the tenant's workspaces",
  admin: "admin: also the tenant's keys",
  operator: 'operator: also tenants and every key',
};

interface ApiKey {
  id: string;
  prefix: string;
  scope: string;
  tenant: string;
  name: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

interface NewKey extends ApiKey {
  key: string;
  tenant_name: string;
}

interface Tenant {
  id: string;
  name: string;
  created_at: string;
}

function NeedsScope({ title, need, session }: { title: string; need: Scope; session: Session }) {
  return (
    <section>
      <h1>{title}</h1>
      <p>This page needs a key of {need} scope; this session's key ({session.key.prefix}…) is of {session.key.scope} scope.</p>
      <p><a href="/">Back to workspaces</a></p>
    </section>
  );
}

export function KeysPage({ session, query }: { session: Session; query: URLSearchParams }) {
  if (!allows(session.key.scope, 'admin')) return <NeedsScope title="API keys" need="admin" session={session} />;
  return <Keys session={session} query={query} />;
}

function Keys({ session, query }: { session: Session; query: URLSearchParams }) {
  const operator = allows(session.key.scope, 'operator');
  const tenantFilter = operator ? query.get('tenant') ?? '' : '';
  const showRevoked = query.get('revoked') === '1';
  const [keys, setKeys] = useState<ApiKey[] | null>(null);
  const [tenants, setTenants] = useState<Tenant[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [creating, setCreating] = useState(query.get('new') === '1');
  const [revoking, setRevoking] = useState<ApiKey | null>(null);
  const [note, setNote] = useState<string | null>(null);

  const setQuery = (k: string, v: string) => {
    const q = new URLSearchParams(query);
    if (v) q.set(k, v);
    else q.delete(k);
    q.delete('new');
    const s = q.toString();
    navigate(`/admin/keys${s ? `?${s}` : ''}`, true);
  };

  const load = async () => {
    try {
      const k = await call<{ keys: ApiKey[] }>('GET', `/v1/keys${tenantFilter ? `?tenant=${encodeURIComponent(tenantFilter)}` : ''}`);
      setKeys(k.keys);
      setError(null);
    } catch (e) {
      setError(errorMessage(e));
    }
  };
  useEffect(() => void load(), [tenantFilter]);
  useEffect(() => {
    if (!operator) return;
    call<{ tenants: Tenant[] }>('GET', '/v1/tenants').then((t) => setTenants(t.tenants)).catch((e) => setError(errorMessage(e)));
  }, [operator]);

  const tenantName = (id: string) =>
    id === session.tenant.id ? session.tenant.name : tenants?.find((t) => t.id === id)?.name ?? id;

  const shown = useMemo(() => (keys ?? [])
    .filter((k) => showRevoked || !k.revoked_at)
    .sort((a, b) => b.created_at.localeCompare(a.created_at)), [keys, showRevoked]);
  const revokedCount = (keys ?? []).filter((k) => k.revoked_at).length;

  const revoke = async (k: ApiKey) => {
    setRevoking(null);
    try {
      await call('DELETE', `/v1/keys/${encodeURIComponent(k.id)}`);
      setNote(`Key ${k.prefix}… (${k.name || 'no name'}) is revoked: it no longer works.`);
      void load();
    } catch (e) {
      setError(`Revoking ${k.prefix}…: ${errorMessage(e)}`);
    }
  };

  return (
    <section class="admin">
      <div class="heading">
        <h1>API keys</h1>
        <button type="button" onClick={() => setCreating(true)}>New key</button>
      </div>
      <p class="muted">
        {operator ? 'Every tenant\'s keys (operator scope).' : `The keys of ${session.tenant.name}.`} A key is shown only when it is made;
        berthd keeps its hash.
      </p>
      <form class="filters" role="search" onSubmit={(e) => e.preventDefault()}>
        {operator && (
          <label>Tenant
            <select value={tenantFilter} onChange={(e) => setQuery('tenant', (e.currentTarget as HTMLSelectElement).value)}>
              <option value="">all tenants</option>
              {(tenants ?? []).map((t) => <option key={t.id} value={t.id}>{t.name}</option>)}
            </select>
          </label>
        )}
        <label class="check">
          <input type="checkbox" checked={showRevoked} onChange={(e) => setQuery('revoked', (e.currentTarget as HTMLInputElement).checked ? '1' : '')} />
          show revoked keys ({revokedCount})
        </label>
      </form>
      {error && <ErrorNote message={error} onDismiss={() => setError(null)} />}
      {note && <p role="status" class="note">{note}</p>}
      {keys === null ? <p aria-busy="true">Loading…</p> : shown.length === 0 ? <p class="empty">No keys{showRevoked ? '' : ' that work'}.</p> : (
        <table class="list keys">
          <thead><tr><th scope="col">Name</th><th scope="col">Key</th><th scope="col">Scope</th>
            {operator && <th scope="col">Tenant</th>}
            <th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Status</th>
            <th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {shown.map((k) => {
              const mine = k.id === session.key.id;
              return (
                <tr key={k.id} data-key={k.id}>
                  <td data-label="Name">{k.name || <span class="muted">no name</span>}{mine && <span class="pill mine">this session</span>}</td>
                  <td data-label="Key" class="mono">{k.prefix}…</td>
                  <td data-label="Scope">{k.scope}</td>
                  {operator && <td data-label="Tenant">{tenantName(k.tenant)}</td>}
                  <td data-label="Created">{formatTime(k.created_at)}</td>
                  <td data-label="Last used">{formatTime(k.last_used_at)}</td>
                  <td data-label="Status">{k.revoked_at ? `revoked ${formatTime(k.revoked_at)}` : 'active'}</td>
                  <td class="row-actions">
                    {!k.revoked_at && allows(session.key.scope, k.scope as Scope) && (
                      <button type="button" class="quiet danger" onClick={() => setRevoking(k)}
                              aria-label={`Revoke ${k.name || k.prefix}`}>Revoke</button>
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      <CreateKey open={creating} session={session} tenants={tenants} tenant={tenantFilter || session.tenant.id}
                 onClose={() => { setCreating(false); if (query.has('new')) setQuery('new', ''); void load(); }} />
      <Confirm open={!!revoking} danger title={`Revoke ${revoking?.name || `${revoking?.prefix ?? ''}…`}?`} action="Revoke"
               message={revoking?.id === session.key.id
                 ? 'This is the key this session signed in with: revoking it signs you out here, and everything using it stops working at once.'
                 : 'Everything using this key stops working at once. This cannot be undone.'}
               onCancel={() => setRevoking(null)} onConfirm={() => revoking && revoke(revoking)} />
    </section>
  );
}

function CreateKey({ open, session, tenants, tenant, onClose }:
  { open: boolean; session: Session; tenants: Tenant[] | null; tenant: string; onClose: () => void }) {
  const [made, setMade] = useState<NewKey | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [copied, setCopied] = useState<string | null>(null);
  const keyInput = useRef<HTMLInputElement>(null);
  const operator = allows(session.key.scope, 'operator');
  // Controlled: Preact sets no default on a <select> from defaultValue.
  const [scope, setScope] = useState<Scope>('write');
  const [tenantChoice, setTenantChoice] = useState(tenant);
  useEffect(() => {
    if (open) {
      setScope('write');
      setTenantChoice(tenant);
    }
  }, [open, tenant]);
  const close = () => {
    setMade(null);  // the key is forgotten with the dialog
    setError(null);
    setCopied(null);
    onClose();
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const body: Record<string, string> = { scope: String(f.get('scope')) };
    const name = String(f.get('name') ?? '').trim();
    if (name) body.name = name;
    if (operator) body.tenant = String(f.get('tenant'));
    setBusy(true);
    setError(null);
    try {
      setMade(await call<NewKey>('POST', '/v1/keys', { body }));
    } catch (err) {
      setError(errorMessage(err));
    } finally {
      setBusy(false);
    }
  };
  const copy = async () => {
    if (!made) return;
    setCopied((await copyText(made.key, keyInput.current)) ? 'Copied to the clipboard.' : 'Copying failed: select the key and copy it.');
  };

  return (
    <Modal title={made ? 'Your new key' : 'New API key'} open={open} onClose={close}>
      {made ? (
        <div class="newkey">
          <p><strong>Copy it now: it is shown only once.</strong> A {made.scope} key for {made.tenant_name}{made.name ? ` (${made.name})` : ''}.</p>
          <div class="copyrow">
            <input ref={keyInput} readOnly value={made.key} aria-label="New API key" class="mono" spellcheck={false}
                   onFocus={(e) => (e.currentTarget as HTMLInputElement).select()} />
            <button type="button" onClick={copy}>Copy</button>
          </div>
          {copied && <p role="status">{copied}</p>}
          <div class="actions"><button type="button" onClick={close}>Done</button></div>
        </div>
      ) : operator && tenants === null ? <p aria-busy="true">Loading the tenants…</p> : (
        <form class="create" onSubmit={submit}>
          <label>Name <span class="muted">(what uses it, e.g. "ci" or "claude on laptop")</span>
            <input name="name" maxLength={200} autoComplete="off" spellcheck={false} autoFocus /></label>
          <label>Scope
            <select name="scope" value={scope} onChange={(e) => setScope((e.currentTarget as HTMLSelectElement).value as Scope)}>
              {kScopes.filter((s) => allows(session.key.scope, s)).map((s) => <option key={s} value={s}>{kScopeHelp[s]}</option>)}
            </select>
          </label>
          {operator && (
            <label>Tenant
              <select name="tenant" value={tenantChoice} onChange={(e) => setTenantChoice((e.currentTarget as HTMLSelectElement).value)}>
                {(tenants ?? [{ id: session.tenant.id, name: session.tenant.name, created_at: '' }]).map((t) =>
                  <option key={t.id} value={t.id}>{t.name}</option>)}
              </select>
            </label>
          )}
          {error && <ErrorNote message={error} />}
          <div class="actions">
            <button type="button" class="quiet" onClick={close}>Cancel</button>
            <button type="submit" disabled={busy}>{busy ? 'Creating…' : 'Create key'}</button>
          </div>
        </form>
      )}
    </Modal>
  );
}

export function TenantsPage({ session }: { session: Session }) {
  if (!allows(session.key.scope, 'operator')) return <NeedsScope title="Tenants" need="operator" session={session} />;
  return <Tenants session={session} />;
}

function Tenants({ session }: { session: Session }) {
  const [tenants, setTenants] = useState<Tenant[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [made, setMade] = useState<Tenant | null>(null);
  const [busy, setBusy] = useState(false);

  const load = async () => {
    try {
      const t = await call<{ tenants: Tenant[] }>('GET', '/v1/tenants');
      setTenants(t.tenants.sort((a, b) => a.name.localeCompare(b.name)));
      setError(null);
    } catch (e) {
      setError(errorMessage(e));
    }
  };
  useEffect(() => void load(), []);

  const create = async (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const name = String(new FormData(form).get('name') ?? '').trim();
    if (!name) return;
    setBusy(true);
    try {
      const t = await call<Tenant>('POST', '/v1/tenants', { body: { name } });
      setMade(t);
      setError(null);
      form.reset();
      void load();
    } catch (err) {
      setError(errorMessage(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="admin">
      <div class="heading"><h1>Tenants</h1></div>
      <p class="muted">A tenant owns workspaces and keys; one tenant's keys never see another's workspaces.</p>
      <form class="inline" onSubmit={create} aria-label="New tenant">
        <label>New tenant's name <input name="name" required maxLength={63} autoComplete="off" spellcheck={false} /></label>
        <button type="submit" disabled={busy}>{busy ? 'Creating…' : 'Create tenant'}</button>
      </form>
      {error && <ErrorNote message={error} onDismiss={() => setError(null)} />}
      {made && (
        <p role="status" class="note">
          Tenant {made.name} is made. It has no key yet:{' '}
          <a href={`/admin/keys?tenant=${encodeURIComponent(made.id)}&new=1`}>create its first key</a>.
        </p>
      )}
      {tenants === null ? <p aria-busy="true">Loading…</p> : (
        <table class="list tenants">
          <thead><tr><th scope="col">Name</th><th scope="col">ID</th><th scope="col">Created</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {tenants.map((t) => (
              <tr key={t.id} data-tenant={t.name}>
                <td data-label="Name">{t.name}{t.id === session.tenant.id && <span class="pill mine">yours</span>}</td>
                <td data-label="ID" class="mono">{t.id}</td>
                <td data-label="Created">{formatTime(t.created_at)}</td>
                <td class="row-actions"><a class="button quiet" href={`/admin/keys?tenant=${encodeURIComponent(t.id)}`}
                                           aria-label={`Keys of ${t.name}`}>Keys</a></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
