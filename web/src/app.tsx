// The shell of the page: who is signed in (GET /v1/sessions/current at load), the header, and
// the page for the current route. Signed out, only the sign-in form is shown.
import { useEffect, useState } from 'preact/hooks';
import { call, errorMessage, onUnauthenticated, setSession, type Session } from './api';
import { onLinkClick, useLocation } from './router';
import { SignIn } from './signin';
import { WorkspaceList } from './workspaces';
import { WorkspacePage } from './workspace';
import { ErrorNote } from './ui';
import { UsagePage } from './usage';
import { KeysPage, TenantsPage, allows } from './admin';

type State = { kind: 'loading' } | { kind: 'signed-out'; note?: string } | { kind: 'signed-in'; session: Session };

export function App() {
  const [state, setState] = useState<State>({ kind: 'loading' });
  const [loadError, setLoadError] = useState<string | null>(null);
  const loc = useLocation();

  const signedIn = (s: Session) => {
    setSession(s);
    setState({ kind: 'signed-in', session: s });
  };
  const signedOut = (note?: string) => {
    setSession(null);
    setState({ kind: 'signed-out', note });
  };

  useEffect(() => {
    onUnauthenticated(() => signedOut('Your session has ended. Sign in again.'));
    call<Session>('GET', '/v1/sessions/current', { quiet401: true })
      .then(signedIn)
      .catch((e) => {
        if ((e as { status?: number }).status === 401) signedOut();
        else setLoadError(errorMessage(e));
      });
  }, []);

  useEffect(() => {
    if (loc.path.startsWith('/w/')) return;  // the workspace page names its tab
    const page = loc.path === '/' ? 'Workspaces' : loc.path === '/usage' ? 'Usage' : loc.path === '/admin/keys' ? 'API keys'
      : loc.path === '/admin/tenants' ? 'Tenants' : 'Not found';
    document.title = state.kind === 'signed-in' ? `${page} · Berth` : 'Berth';
  }, [loc.path, state.kind]);

  useEffect(() => {
    document.addEventListener('click', onLinkClick);
    return () => document.removeEventListener('click', onLinkClick);
  }, []);

  if (loadError) {
    return (
      <main class="center">
        <h1>Berth</h1>
        <ErrorNote message={loadError} />
        <button type="button" onClick={() => window.location.reload()}>Try again</button>
      </main>
    );
  }
  if (state.kind === 'loading') return <main class="center" aria-busy="true"><p>Loading…</p></main>;
  if (state.kind === 'signed-out') return <SignIn note={state.note} onSignedIn={signedIn} />;

  const session = state.session;
  const signOut = async () => {
    try {
      await call('DELETE', '/v1/sessions/current');
    } catch (e) {
      if ((e as { status?: number }).status !== 401) {
        window.alert(`Signing out failed: ${errorMessage(e)}`);
        return;
      }
    }
    signedOut('You are signed out.');
  };

  const m = /^\/w\/([^/]+)(?:\/([a-z]+))?\/?$/.exec(loc.path);
  return (
    <>
      <a class="skip" href="#main">Skip to content</a>
      <header class="top">
        <a class="brand" href="/">Berth</a>
        <nav class="mainnav" aria-label="Main">
          <a href="/" aria-current={loc.path === '/' || loc.path.startsWith('/w/') ? 'page' : undefined}>Workspaces</a>
          <a href="/usage" aria-current={loc.path === '/usage' ? 'page' : undefined}>Usage</a>
          {allows(session.key.scope, 'admin') && (
            <a href="/admin/keys" aria-current={loc.path === '/admin/keys' ? 'page' : undefined}>API keys</a>
          )}
          {allows(session.key.scope, 'operator') && (
            <a href="/admin/tenants" aria-current={loc.path === '/admin/tenants' ? 'page' : undefined}>Tenants</a>
          )}
        </nav>
        <span class="who" title={`key ${session.key.prefix}… (${session.key.scope})`}>
          {session.tenant.name} · <span class="muted">{session.key.scope}</span>
        </span>
        <button type="button" class="quiet" onClick={signOut}>Sign out</button>
      </header>
      <main id="main" tabIndex={-1}>
        {m ? (
          <WorkspacePage key={m[1]} ws={decodeURIComponent(m[1]!)} tab={m[2] ?? 'terminal'} query={loc.query} />
        ) : loc.path === '/' ? (
          <WorkspaceList query={loc.query} />
        ) : loc.path === '/usage' ? (
          <UsagePage query={loc.query} />
        ) : loc.path === '/admin/keys' ? (
          <KeysPage session={session} query={loc.query} />
        ) : loc.path === '/admin/tenants' ? (
          <TenantsPage session={session} />
        ) : (
          <section><h1>Not found</h1><p>There is no page at {loc.path}. <a href="/">Workspaces</a></p></section>
        )}
      </main>
    </>
  );
}
