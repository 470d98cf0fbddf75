// Client-side routes (berthd answers index.html for every path outside /v1 and /mcp):
//   /                      the workspaces
//   /w/NAME[/TAB][?path=]  a workspace's page
import { useEffect, useState } from 'preact/hooks';

export interface Location {
  path: string;
  query: URLSearchParams;
}

function current(): Location {
  return { path: window.location.pathname, query: new URLSearchParams(window.location.search) };
}

const listeners = new Set<() => void>();
window.addEventListener('popstate', () => listeners.forEach((l) => l()));

export function navigate(to: string, replace = false): void {
  if (to === window.location.pathname + window.location.search) return;
  if (replace) window.history.replaceState(null, '', to);
  else window.history.pushState(null, '', to);
  listeners.forEach((l) => l());
}

export function useLocation(): Location {
  const [loc, setLoc] = useState(current);
  useEffect(() => {
    const l = () => setLoc(current());
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return loc;
}

/** Follows same-origin links without a page load (modifier keys keep the browser's way). */
export function onLinkClick(e: MouseEvent): void {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = (e.target as Element | null)?.closest?.('a');
  if (!a || a.target || a.hasAttribute('download') || a.origin !== window.location.origin) return;
  if (a.pathname.startsWith('/v1/')) return;
  e.preventDefault();
  navigate(a.pathname + a.search);
}
