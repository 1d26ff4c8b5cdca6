/** Reads Secrets on demand through the API (no Secret informer: we must not cache every Secret in the cluster). */
import { ApiException, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { SecretReader } from './provider.ts';

/** Returns a reader that decodes `data` (base64) and `stringData`-style values to UTF-8; undefined on 404. */
export function secretReader(kc: KubeConfig): SecretReader {
  const core = kc.makeApiClient(CoreV1Api);
  return async (namespace, name) => {
    try {
      const s = await core.readNamespacedSecret({ name, namespace });
      const out: Record<string, string> = {};
      for (const [k, v] of Object.entries(s.data ?? {})) out[k] = Buffer.from(v, 'base64').toString('utf8');
      return out;
    } catch (err) {
      if (err instanceof ApiException && err.code === 404) return undefined;
      throw err;
    }
  };
}
