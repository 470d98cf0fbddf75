// ws.network: what the workspace's guest may reach (docs/api.md, "Network").

import { ApiClient, CallOptions, wsPath } from './client.js';
import { InvalidArgumentError } from './errors.js';

export type Egress = 'open' | 'none' | 'allowlist';

/** The policy, whether it is enforced, counters and the last refusals; fields as on the wire. */
export interface NetworkStatus {
  egress: Egress;
  allow: string[];
  /** False when the operator turned isolation off: the policy is kept but not enforced. */
  isolated: boolean;
  counters: Record<string, number>;
  refused: Array<{ address: string; port: number; at: string }>;
  refused_names: Array<{ name: string; at: string }>;
}

export interface NetworkPolicy {
  egress?: Egress;
  /** Names (`github.com`, `*.pypi.org`) and CIDRs; alone it means `allowlist`. */
  allow?: string[];
}

export class Network {
  constructor(private readonly client: ApiClient, private readonly ws: string) {}

  /** The policy, counters and the last refused destinations. */
  get(options: CallOptions = {}): Promise<NetworkStatus> {
    return this.client.json<NetworkStatus>({ method: 'GET', path: wsPath(this.ws, '/network'), ...options });
  }

  /** Replaces the whole policy, applied to the running guest at once. */
  set(policy: NetworkPolicy, options: CallOptions = {}): Promise<NetworkStatus> {
    if (policy.egress !== undefined && !['open', 'none', 'allowlist'].includes(policy.egress)) {
      throw new InvalidArgumentError(`egress is open, none or allowlist, not '${policy.egress}'`,
                                     { code: 'invalid_argument' });
    }
    if (policy.egress === undefined && policy.allow === undefined) {
      throw new InvalidArgumentError('set egress, allow, or both', { code: 'invalid_argument' });
    }
    const body: Record<string, unknown> = {};
    if (policy.egress !== undefined) body.egress = policy.egress;
    if (policy.allow !== undefined) body.allow = policy.allow;
    return this.client.json<NetworkStatus>({ method: 'PATCH', path: wsPath(this.ws, '/network'), json: body, ...options });
  }
}
