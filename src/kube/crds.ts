/**
 * Installs CustomResourceDefinitions from YAML files and waits until each is Established, and
 * the shipped admission policies (config/admission). Used by the dev control plane (`npm start`
 * without a cluster) and the test setup.
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
import { parseAllDocuments } from 'yaml';
import { errorMessage, errorStatusCode, kubeRequest, objectPath } from './client.ts';

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

/** A ValidatingAdmissionPolicy or ValidatingAdmissionPolicyBinding as read from YAML. */
interface AdmissionObject {
  apiVersion: string;
  kind: 'ValidatingAdmissionPolicy' | 'ValidatingAdmissionPolicyBinding';
  metadata: { name: string };
  spec: unknown;
}

/** The ValidatingAdmissionPolicy(Binding) documents of `files` (other kinds are ignored). */
export async function readAdmissionObjects(files: readonly string[]): Promise<AdmissionObject[]> {
  const out: AdmissionObject[] = [];
  for (const f of files) {
    for (const doc of parseAllDocuments(await readFile(f, 'utf8'))) {
      const obj = doc.toJS() as Partial<AdmissionObject> | null;
      if (obj?.kind === 'ValidatingAdmissionPolicy' || obj?.kind === 'ValidatingAdmissionPolicyBinding')
        out.push(obj as AdmissionObject);
    }
  }
  return out;
}

/**
 * Makes each admission object exist as written, for the dev control plane (`npm start`), which
 * has no `kubectl apply -k config/default`: created when absent; when present with another
 * spec, deleted and created again — not updated, because the controller trusts a policy only at
 * `metadata.generation` 1 (src/preview/admission.ts: an edited policy may have been weakened).
 * Throws with the object's name and the API server's message on rejection.
 */
export async function installAdmissionObjects(
  kc: KubeConfig,
  objects: readonly AdmissionObject[],
): Promise<void> {
  for (const obj of objects) {
    const path = objectPath({
      group: 'admissionregistration.k8s.io',
      version: 'v1',
      plural:
        obj.kind === 'ValidatingAdmissionPolicy'
          ? 'validatingadmissionpolicies'
          : 'validatingadmissionpolicybindings',
      name: obj.metadata.name,
    });
    const current = await kubeRequest<{ spec?: unknown }>(kc, { method: 'GET', path }).catch(
      (err: unknown) => {
        if (errorStatusCode(err) === 404) return undefined;
        throw err;
      },
    );
    if (current !== undefined && sameJson(current.spec, obj.spec)) continue;
    if (current !== undefined) await kubeRequest(kc, { method: 'DELETE', path });
    try {
      await kubeRequest(kc, { method: 'POST', path: path.slice(0, path.lastIndexOf('/')), body: obj });
    } catch (err) {
      throw new Error(`installing ${obj.kind} ${obj.metadata.name}: ${errorMessage(err)}`, { cause: err });
    }
  }
}

/** Whether the server's copy holds every field of `want` with the same value (it adds defaults). */
function sameJson(have: unknown, want: unknown): boolean {
  if (Array.isArray(want))
    return Array.isArray(have) && have.length === want.length && want.every((w, i) => sameJson(have[i], w));
  if (typeof want === 'object' && want !== null) {
    if (typeof have !== 'object' || have === null || Array.isArray(have)) return false;
    return Object.entries(want).every(([k, v]) => sameJson((have as Record<string, unknown>)[k], v));
  }
  return have === want;
}
