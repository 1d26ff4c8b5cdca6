/**
 * Installs CustomResourceDefinitions from YAML files and waits until each is Established.
 * Used by the dev control plane (`npm start` without a cluster) and the test setup.
 */
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ApiException,
  ApiextensionsV1Api,
  loadAllYaml,
  type KubeConfig,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';

/** Every `*.yaml`/`*.yml` file directly in `dir`, sorted; [] when the folder does not exist. */
export async function yamlFilesIn(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir))
      .filter((f) => f.endsWith('.yaml') || f.endsWith('.yml'))
      .sort()
      .map((f) => join(dir, f));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

/** Parses the CRD documents of `files` (other kinds are ignored). Throws on YAML errors, naming the file. */
export async function readCRDs(files: readonly string[]): Promise<V1CustomResourceDefinition[]> {
  const out: V1CustomResourceDefinition[] = [];
  for (const f of files) {
    // client-node's loader returns typed model objects: its typed API client serialises only the
    // properties it knows under its own names (`_enum`, `x_kubernetes_*`), so plain parsed YAML
    // would lose enums, defaults and CEL rules on the way to the server.
    let docs: unknown[];
    try {
      docs = loadAllYaml(await readFile(f, 'utf8'));
    } catch (err) {
      throw new Error(`${f}: ${(err as Error).message}`, { cause: err });
    }
    for (const obj of docs as (V1CustomResourceDefinition | null)[]) {
      if (obj?.kind === 'CustomResourceDefinition') out.push(obj);
    }
  }
  return out;
}

/**
 * Creates or replaces each CRD (a replace that meets a concurrent write is retried up to 5 times),
 * then waits (≤ `timeoutMs`, default 30 s) until all report
 * `Established=True`. Throws with the CRD name and the API server's message on rejection.
 */
export async function installCRDs(
  kc: KubeConfig,
  crds: readonly V1CustomResourceDefinition[],
  timeoutMs = 30_000,
): Promise<void> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  for (const crd of crds) {
    const name = crd.metadata?.name ?? '';
    try {
      await api.createCustomResourceDefinition({ body: crd });
    } catch (err) {
      if (!(err instanceof ApiException && err.code === 409)) {
        throw new Error(
          `installing CRD ${name}: ${err instanceof ApiException ? String(err.body) : String(err)}`,
          {
            cause: err,
          },
        );
      }
      // Replace at the version just read; another writer in between (a second installer, the
      // API server's own status update) answers 409 Conflict: read again, a few times.
      for (let attempt = 1; ; attempt++) {
        const current = await api.readCustomResourceDefinition({ name });
        try {
          await api.replaceCustomResourceDefinition({
            name,
            body: {
              ...crd,
              metadata: { ...crd.metadata, resourceVersion: current.metadata?.resourceVersion ?? '' },
            },
          });
          break;
        } catch (e) {
          if (!(e instanceof ApiException && e.code === 409) || attempt >= 5) throw e;
          await sleep(50 * attempt);
        }
      }
    }
  }
  const deadline = Date.now() + timeoutMs;
  for (const crd of crds) {
    const name = crd.metadata?.name ?? '';
    for (;;) {
      const got = await api.readCustomResourceDefinition({ name });
      if (got.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) break;
      if (Date.now() > deadline) throw new Error(`CRD ${name} not Established after ${timeoutMs} ms`);
      await sleep(100);
    }
  }
}
