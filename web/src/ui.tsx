// Small shared pieces: error and state display, a confirmation dialog, time formatting.
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';

export function ErrorNote({ message, onDismiss }: { message: string; onDismiss?: () => void }) {
  return (
    <div class="error" role="alert">
      <span>{message}</span>
      {onDismiss && <button type="button" class="quiet" onClick={onDismiss} aria-label="Dismiss">×</button>}
    </div>
  );
}

const kBusy = new Set(['creating', 'starting', 'stopping', 'hibernating', 'deleting']);

export function isBusy(state: string): boolean {
  return kBusy.has(state);
}

export function StatePill({ state }: { state: string }) {
  return <span class={`pill s-${state}`}>{isBusy(state) && <span class="spinner" aria-hidden="true" />}{state}</span>;
}

/** The current time, re-rendered every `ms`. */
export function useNow(ms = 1000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = window.setInterval(() => setNow(Date.now()), ms);
    return () => window.clearInterval(t);
  }, [ms]);
  return now;
}

export function formatDuration(totalSeconds: number): string {
  const s = Math.max(0, Math.round(totalSeconds));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${String(s % 60).padStart(2, '0')} s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${String(m % 60).padStart(2, '0')} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

/** How long ago `iso` was, from `now` (ms), coarsely: "12 s ago", "3 min ago", "5 h 10 min ago". */
export function ago(iso: string | null | undefined, now: number): string {
  const t = iso ? Date.parse(iso) : NaN;
  if (!Number.isFinite(t)) return '';
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 5) return 'just now';
  if (s < 60) return `${s} s ago`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ago`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${m % 60} min ago`;
  return `${Math.floor(h / 24)} d ago`;
}

/** What berthd accepts as a workspace, checkpoint or template name (lowercase letters, digits
 * and '-', not at either end), for an <input pattern>; berthd's own message says the rest. */
export const kNamePattern = '[a-z0-9]([a-z0-9\\-]*[a-z0-9])?';
export const kNameHint = 'lowercase letters, digits and -';

/** Copies text to the clipboard; where the Clipboard API is refused (a page not served over
 * https or from localhost), selects `fallback`'s text and copies that. */
export async function copyText(text: string, fallback?: HTMLInputElement | HTMLTextAreaElement | null): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    if (!fallback) return false;
    fallback.focus();
    fallback.select();
    try {
      return document.execCommand('copy');
    } catch {
      return false;
    }
  }
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

/** A modal <dialog>: the browser traps focus in it and gives it back on close. */
export function Modal({ title, open, onClose, children }:
  { title: string; open: boolean; onClose: () => void; children: ComponentChildren }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) d.showModal();
    if (!open && d.open) d.close();
  }, [open]);
  return (
    <dialog ref={ref} aria-labelledby="modal-title" onClose={onClose} onCancel={onClose}>
      {open && (
        <>
          <h2 id="modal-title">{title}</h2>
          {children}
        </>
      )}
    </dialog>
  );
}

export function Confirm({ title, message, action, danger, open, onCancel, onConfirm }:
  { title: string; message: ComponentChildren; action: string; danger?: boolean; open: boolean;
    onCancel: () => void; onConfirm: () => void }) {
  return (
    <Modal title={title} open={open} onClose={onCancel}>
      <p>{message}</p>
      <div class="actions">
        <button type="button" class="quiet" onClick={onCancel} autoFocus>Cancel</button>
        <button type="button" class={danger ? 'danger' : ''} onClick={onConfirm}>{action}</button>
      </div>
    </Modal>
  );
}
