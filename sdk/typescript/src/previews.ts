// ws.previews: links to a web server in the workspace (docs/api.md, "Previews").

import { ApiClient, CallOptions, wsPath } from './client.js';

export interface Preview {
  id: string;
  workspace_id: string;
  port: number;
  public: boolean;
  status: 'active' | 'expired' | 'revoked';
  /** The address, no credential in it. */
  url: string;
  /** A private preview's token: only in create()'s answer. */
  token?: string;
  /** `url` with the token: the link to hand to a person (only in create()'s answer). */
  link?: string;
  created_at: string;
  expires_at: string;
  last_used_at?: string | null;
  revoked_at: string | null;
}

export interface PreviewOptions extends CallOptions {
  /** Anyone with the URL may open it (default false: only with the token or an API key). */
  public?: boolean;
  /** Seconds, or a duration such as "2h" or "7d" (default: berthd's, 24 h). */
  expiresIn?: number | string;
}

export class Previews {
  constructor(private readonly client: ApiClient, private readonly ws: string) {}

  /** Makes a preview of `port` (it does not wake the workspace). */
  create(port: number, options: PreviewOptions = {}): Promise<Preview> {
    const { public: isPublic, expiresIn, ...call } = options;
    const body: Record<string, unknown> = { port };
    if (isPublic !== undefined) body.public = isPublic;
    if (expiresIn !== undefined) body.expires_in = expiresIn;
    return this.client.json<Preview>({ method: 'POST', path: wsPath(this.ws, '/previews'), json: body, ...call });
  }

  /** The workspace's previews, newest first (no tokens). */
  async list(options: CallOptions = {}): Promise<Preview[]> {
    const answer = await this.client.json<{ previews: Preview[] }>({
      method: 'GET', path: wsPath(this.ws, '/previews'), ...options,
    });
    return answer.previews;
  }

  /** Revokes a preview: it stops working at once. */
  revoke(id: string, options: CallOptions = {}): Promise<Preview> {
    return this.client.json<Preview>({
      method: 'DELETE', path: wsPath(this.ws, `/previews/${encodeURIComponent(id)}`), ...options,
    });
  }
}
