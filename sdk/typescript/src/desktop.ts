// ws.desktop: who controls the desktop's input, and viewer tickets (docs/api.md, "Desktop").
// Screenshots and input actions are not in berthd's API yet, so not here either.

import { ApiClient, CallOptions, wsPath } from './client.js';
import { InvalidArgumentError } from './errors.js';

/** The control state; fields as on the wire. */
export interface DesktopControl {
  holder: 'agent' | 'human';
  since: string | null;
  /** The key id of the person, or of whoever handed back. */
  by: string | null;
  lease_expires: string | null;
  reason: string | null;
  /** The agent may not read the screen while a person holds it. */
  private: boolean;
}

/** A one-time ticket for one browser viewer, valid 60 s; `url` is the WebSocket's address. */
export interface DesktopTicket {
  ticket: string;
  mode: 'view' | 'control';
  expires_at: string;
  url: string;
}

export class Desktop {
  constructor(private readonly client: ApiClient, private readonly ws: string) {}

  /** Who holds control now. */
  control(options: CallOptions = {}): Promise<DesktopControl> {
    return this.client.json<DesktopControl>({ method: 'GET', path: wsPath(this.ws, '/desktop/control'), ...options });
  }

  /** Waits (at most `timeoutMs`, 1 h at most; default 60 s) until the agent holds control
   * again, without polling; read `holder` to see which came first. */
  waitRelease(options: CallOptions & { timeoutMs?: number } = {}): Promise<DesktopControl> {
    const { timeoutMs = 60_000, ...call } = options;
    if (!(timeoutMs > 0 && timeoutMs <= 3_600_000)) {
      throw new InvalidArgumentError('timeoutMs is at most 1 hour', { code: 'invalid_argument' });
    }
    return this.client.json<DesktopControl>({
      method: 'GET', path: wsPath(this.ws, '/desktop/control'),
      query: { wait: 'release', timeout: `${Math.max(1, Math.round(timeoutMs / 1000))}s` },
      requestTimeoutMs: timeoutMs + 30_000, ...call,
    });
  }

  /** A person takes control (a lease renewed by their input); `private`: the agent may not
   * read the screen meanwhile. ConflictError while someone else holds it. */
  takeOver(options: CallOptions & { private?: boolean; reason?: string } = {}): Promise<DesktopControl> {
    const { private: isPrivate, reason, ...call } = options;
    const body: Record<string, unknown> = { private: isPrivate ?? false };
    if (reason !== undefined) body.reason = reason;
    return this.client.json<DesktopControl>({
      method: 'POST', path: wsPath(this.ws, '/desktop/control/takeover'), json: body, ...call,
    });
  }

  /** Hands control back to the agent. */
  release(options: CallOptions & { note?: string } = {}): Promise<DesktopControl> {
    const { note, ...call } = options;
    return this.client.json<DesktopControl>({
      method: 'POST', path: wsPath(this.ws, '/desktop/control/release'), json: note === undefined ? {} : { note }, ...call,
    });
  }

  /** A one-time ticket that opens one viewer (noVNC) within 60 s. */
  ticket(mode: 'view' | 'control' = 'view', options: CallOptions = {}): Promise<DesktopTicket> {
    if (mode !== 'view' && mode !== 'control') {
      throw new InvalidArgumentError(`a ticket's mode is view or control, not '${String(mode)}'`, { code: 'invalid_argument' });
    }
    return this.client.json<DesktopTicket>({
      method: 'POST', path: wsPath(this.ws, '/desktop/tickets'), json: { mode }, ...options,
    });
  }
}
