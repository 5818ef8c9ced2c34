import { Component, type ReactNode } from 'react';

// Shows what broke instead of a blank page (say a part of the app that failed to download),
// with a way out.
export class ErrorBoundary extends Component<{ children: ReactNode }, { error: Error | null }> {
  state = { error: null as Error | null };

  static getDerivedStateFromError(error: Error) {
    return { error };
  }

  render() {
    if (!this.state.error) return this.props.children;
    return (
      <div className="page" data-testid="page-error">
        <h2>This page could not be shown</h2>
        <p className="error-text">{this.state.error.message}</p>
        <button className="primary" onClick={() => window.location.reload()}>
          Reload
        </button>
      </div>
    );
  }
}
