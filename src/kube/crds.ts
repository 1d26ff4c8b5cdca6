/**
 * Installs CustomResourceDefinitions from YAML files and waits until each is Established, and
 * the shipped admission policies (config/admission). Used by the dev control plane (`npm start`
 * without a cluster) and the test setup.
 */
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { errorMessage, errorStatusCode, kubeRequest, objectPath, type KubeConfig } from './client.ts';
import { yaml } from '../text.ts';

/** A CustomResourceDefinition as read from YAML (apiextensions.k8s.io/v1), the fields used here. */
export interface CustomResourceDefinition {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; resourceVersion?: string };
  spec?: unknown;
  status?: { conditions?: { type: string; status: string }[] };
}

/** Path of the CRD collection, or of one CRD. */
function crdPath(name?: string): string {
  return objectPath({
    group: 'apiextensions.k8s.io',
    version: 'v1',
    plural: 'customresourcedefinitions',
    ...(name !== undefined ? { name } : {}),
  });
}

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
export async function readCRDs(files: readonly string[]): Promise<CustomResourceDefinition[]> {
  const out: CustomResourceDefinition[] = [];
  for (const f of files) {
    for (const doc of yaml().parseAllDocuments(await readFile(f, 'utf8'))) {
      const bad = doc.errors[0];
      if (bad !== undefined) throw new Error(`${f}: ${bad.message}`);
      const obj = doc.toJS() as CustomResourceDefinition | null;
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
  crds: readonly CustomResourceDefinition[],
  timeoutMs = 30_000,
): Promise<void> {
  const read = (name: string): Promise<CustomResourceDefinition> =>
    kubeRequest(kc, { method: 'GET', path: crdPath(name) });
  for (const crd of crds) {
    const name = crd.metadata?.name ?? '';
    try {
      await kubeRequest(kc, { method: 'POST', path: crdPath(), body: crd });
    } catch (err) {
      if (errorStatusCode(err) !== 409) {
        throw new Error(`installing CRD ${name}: ${errorMessage(err)}`, { cause: err });
      }
      // Replace at the version just read; another writer in between (a second installer, the
      // API server's own status update) answers 409 Conflict: read again, a few times.
      for (let attempt = 1; ; attempt++) {
        const current = await read(name);
        try {
          await kubeRequest(kc, {
            method: 'PUT',
            path: crdPath(name),
            body: {
              ...crd,
              metadata: { ...crd.metadata, resourceVersion: current.metadata?.resourceVersion ?? '' },
            },
          });
          break;
        } catch (e) {
          if (errorStatusCode(e) !== 409 || attempt >= 5) {
            throw new Error(`installing CRD ${name}: ${errorMessage(e)}`, { cause: e });
          }
          await sleep(50 * attempt);
        }
      }
    }
  }
  const deadline = Date.now() + timeoutMs;
  for (const crd of crds) {
    const name = crd.metadata?.name ?? '';
    for (;;) {
      const got = await read(name);
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
    for (const doc of yaml().parseAllDocuments(await readFile(f, 'utf8'))) {
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
