// The shell: who is logged in, the navigation, and which page the path shows. Any 401 from
// the API (client.ts) lands here and shows the login page, remembering where the user was.

import { lazy, Suspense, useCallback, useEffect } from 'react';
import { api, onUnauthorized } from './api/client';
import { keys, queryClient, useWhoami } from './api/queries';
import type { User } from './api/types';
import { Link, match, navigate, useLocation } from './router';
import { LoginPage } from './pages/Login';
import { JobsPage } from './pages/Jobs';
import { JobPage } from './pages/Job';
import { QueuesPage } from './pages/Queues';
import { NodesPage } from './pages/Nodes';
import { DatasetsPage } from './pages/Datasets';
import { ErrorBoundary } from './components/ErrorBoundary';

// The editor carries yaml, the form and the palette: loaded when first opened (tried twice:
// a dropped connection should not leave the page blank).
const CreatePage = lazy(() =>
  import('./pages/Create').catch(() => new Promise<typeof import('./pages/Create')>((resolve, reject) => {
    setTimeout(() => import('./pages/Create').then(resolve, reject), 500);
  })),
);

const NAV = [
  { to: '/jobs', label: 'Jobs' },
  { to: '/create', label: 'Create job' },
  { to: '/queues', label: 'Queues' },
  { to: '/nodes', label: 'Nodes' },
  { to: '/datasets', label: 'Datasets' },
];

// Who is logged in lives in the query cache; logging in or out drops everything cached for
// the previous user.
function setUser(u: User | null): void {
  if (u === null) queryClient.setQueryData(keys.whoami, null);
  else {
    queryClient.removeQueries({ predicate: (q) => q.queryKey[0] !== keys.whoami[0] });
    queryClient.setQueryData(keys.whoami, u);
  }
}

export function App() {
  const user = useWhoami().data;
  const { path, search } = useLocation();

  useEffect(
    () =>
      onUnauthorized(() => {
        setUser(null);
        const here = window.location.pathname + window.location.search;
        if (!window.location.pathname.startsWith('/login')) navigate(`/login?next=${encodeURIComponent(here)}`, true);
      }),
    [],
  );

  const loggedIn = useCallback(
    (u: User) => {
      setUser(u);
      const next = search.get('next');
      navigate(next && next.startsWith('/') && !next.startsWith('//') ? next : '/jobs', true);
    },
    [search],
  );

  const logout = async () => {
    await api('/logout', { method: 'POST' }).catch(() => undefined);
    setUser(null);
    navigate('/login', true);
  };

  if (user === undefined) return <div className="splash">Yard</div>;
  if (user === null || path === '/login') {
    if (user) {
      // already logged in: the login page has nothing to do
      navigate('/jobs', true);
      return null;
    }
    return <LoginPage onLogin={loggedIn} />;
  }

  let page: JSX.Element;
  let m: Record<string, string> | null;
  if (path === '/' || path === '/jobs') page = <JobsPage user={user} />;
  else if ((m = match('/jobs/:name', path))) page = <JobPage key={m.name} name={m.name} />;
  else if (path === '/create')
    page = (
      <Suspense fallback={<div className="loading">Loading the editor…</div>}>
        <CreatePage />
      </Suspense>
    );
  else if (path === '/queues') page = <QueuesPage />;
  else if (path === '/nodes') page = <NodesPage />;
  else if (path === '/datasets') page = <DatasetsPage />;
  else
    page = (
      <div className="page" data-testid="not-found">
        <h2>Not found</h2>
        <p>
          Nothing lives at <code>{path}</code>. <Link to="/jobs">Go to the jobs</Link>.
        </p>
      </div>
    );

  return (
    <div className="app">
      <header className="topbar">
        <span className="brand">Yard</span>
        <nav>
          {NAV.map((n) => (
            <Link
              key={n.to}
              to={n.to}
              data-testid={`nav-${n.to.slice(1)}`}
              className={path === n.to || (n.to === '/jobs' && (path === '/' || path.startsWith('/jobs/'))) ? 'active' : ''}
            >
              {n.label}
            </Link>
          ))}
        </nav>
        <span className="whoami" data-testid="whoami">
          {user.name}
          {user.admin && <span className="pill">admin</span>}
        </span>
        <button data-testid="logout" onClick={logout}>
          Log out
        </button>
      </header>
      <main>
        <ErrorBoundary key={path}>{page}</ErrorBoundary>
      </main>
    </div>
  );
}
