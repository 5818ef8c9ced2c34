import { useState, type FormEvent } from 'react';
import { api, ApiError } from '../api/client';
import type { User } from '../api/types';

export function LoginPage({ onLogin }: { onLogin: (u: User) => void }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (!token.trim()) {
      setError('Paste your API token (yardctl user token create NAME prints one; an admin token is in the master data directory, admin.token).');
      return;
    }
    setBusy(true);
    setError('');
    try {
      await api<User>('/login', { json: { token: token.trim() }, quiet401: true });
      // the cookie is set; whoami answers with the full user
      const u = await api<User>('/whoami', { quiet401: true });
      onLogin(u);
    } catch (err) {
      setError(err instanceof ApiError && err.status === 401 ? 'That token is not valid (unknown, revoked or expired).' : (err as Error).message);
    } finally {
      setBusy(false);
    }
  };

  return (
    <div className="login">
      <form className="login-box" onSubmit={submit}>
        <h1>Yard</h1>
        <label htmlFor="token">API token</label>
        <input
          id="token"
          data-testid="login-token"
          type="password"
          autoComplete="off"
          autoFocus
          value={token}
          onChange={(e) => setToken(e.target.value)}
          placeholder="yard_…"
        />
        {error && (
          <div className="error-text" role="alert" data-testid="login-error">
            {error}
          </div>
        )}
        <button className="primary" type="submit" data-testid="login-submit" disabled={busy}>
          {busy ? 'Logging in…' : 'Log in'}
        </button>
        <p className="hint">
          The token is exchanged for a session cookie (HttpOnly, SameSite=Strict); the token itself is not stored in the
          browser.
        </p>
      </form>
    </div>
  );
}
