// The only thing a signed-out visitor sees. The key goes to POST /v1/sessions once and is then
// forgotten: berthd answers with an HttpOnly cookie and the CSRF token for this page.
import { useState } from 'preact/hooks';
import { call, errorMessage, type Session } from './api';
import { ErrorNote } from './ui';

export function SignIn({ note, onSignedIn }: { note?: string; onSignedIn: (s: Session) => void }) {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const input = form.elements.namedItem('api_key') as HTMLInputElement;
    const key = input.value.trim();
    if (!key) {
      setError('Enter an API key.');
      input.focus();
      return;
    }
    setBusy(true);
    setError(null);
    try {
      const s = await call<Session>('POST', '/v1/sessions', { body: { api_key: key }, quiet401: true });
      input.value = '';
      onSignedIn(s);
    } catch (err) {
      setError(errorMessage(err));
      input.select();
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="center signin">
      <h1>Berth</h1>
      <form onSubmit={submit} aria-describedby="signin-help">
        <label for="api_key">API key</label>
        <input id="api_key" name="api_key" type="password" autoComplete="off" spellcheck={false}
               placeholder="bk_…" autoFocus required aria-invalid={error ? 'true' : undefined} />
        <p id="signin-help" class="muted">
          The key is exchanged for a session cookie and is not kept by this page.
        </p>
        {note && !error && <p role="status">{note}</p>}
        {error && <ErrorNote message={error} />}
        <button type="submit" disabled={busy}>{busy ? 'Signing in…' : 'Sign in'}</button>
      </form>
    </main>
  );
}
