// desktop.html: the desktop for someone without a session, from a shared link
// (desktop.html#ws=ID&ticket=dt_…). The ticket is in the fragment, so it is never sent in a
// request line or a Referer, and it is taken out of the address bar at once: it opens one
// viewer (view or control, as it was made) and, while that viewer is open, the control routes.
import './style.css';
import { render } from 'preact';
import { DesktopView, linkAccess, type DesktopAccess, type Mode } from './desktop';

function fromFragment(): { access: DesktopAccess } | { error: string } {
  const params = new URLSearchParams(window.location.hash.replace(/^#/, ''));
  const ws = params.get('ws') ?? '';
  const ticket = params.get('ticket') ?? '';
  const mode = (params.get('mode') ?? '') as Mode | '';
  if (!ws || !/^dt_[0-9a-f]{64}$/.test(ticket)) {
    return { error: 'This address is not a desktop link: it needs #ws=…&ticket=dt_… (make one on the workspace\'s Desktop tab).' };
  }
  window.history.replaceState(null, '', `${window.location.pathname}#ws=${encodeURIComponent(ws)}`);
  return { access: linkAccess(ws, ticket, mode === 'view' || mode === 'control' ? mode : 'control') };
}

const got = fromFragment();

function Page() {
  const ws = 'access' in got ? got.access.ws : '';
  return (
    <>
      <header class="top">
        <a class="brand" href="/">Berth</a>
        <span class="muted">desktop{ws ? ` of ${ws}` : ''}</span>
      </header>
      <main id="main" class="desk-page">
        <h1 class="sr-only">Desktop{ws ? ` of ${ws}` : ''}</h1>
        {'access' in got ? <DesktopView access={got.access} running /> : <div class="error" role="alert">{got.error}</div>}
      </main>
    </>
  );
}

document.title = 'Desktop · Berth';
render(<Page />, document.getElementById('app')!);
