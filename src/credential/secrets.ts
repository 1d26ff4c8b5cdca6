/** Reads Secrets on demand through the API (no Secret informer: we must not cache every Secret in the cluster). */
import { errorStatusCode, kubeRequest, objectPath, type KubeConfig } from '../kube/client.ts';
import type { SecretReader } from './provider.ts';

/** Returns a reader that decodes `data` (base64) and `stringData`-style values to UTF-8; undefined on 404. */
export function secretReader(kc: KubeConfig): SecretReader {
  return async (namespace, name) => {
    let s: { data?: Record<string, string> };
    try {
      s = await kubeRequest(kc, {
        method: 'GET',
        path: objectPath({ group: '', version: 'v1', plural: 'secrets', namespace, name }),
      });
    } catch (err) {
      if (errorStatusCode(err) === 404) return undefined;
      throw err;
    }
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(s.data ?? {})) out[k] = Buffer.from(v, 'base64').toString('utf8');
    return out;
  };
}
