/**
 * The V8 flags the controller ships with, read from where they are set, so that a benchmark runs
 * the controller as the image and the Deployment do: the Dockerfile's ENTRYPOINT puts flags
 * before the script (`node --max-semi-space-size=2 --optimize-for-size dist/main.js`), the Deployment
 * (config/manager/manager.yaml) sets `NODE_OPTIONS` (`--max-old-space-size=160`). Throws when
 * either is not found: a benchmark must not silently measure another configuration.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';

export interface ShippedNode {
  /** Flags before the script (the Dockerfile's ENTRYPOINT). */
  flags: string[];
  /** `NODE_OPTIONS` of the controller container (config/manager/manager.yaml). */
  nodeOptions: string;
}

export function shippedNode(root: string): ShippedNode {
  const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
  const entry = /^ENTRYPOINT\s+(\[.*\])\s*$/m.exec(dockerfile);
  if (!entry?.[1]) throw new Error('Dockerfile: no ENTRYPOINT ["node", …] found');
  const argv = JSON.parse(entry[1]) as string[];
  const script = argv.findIndex((a) => a.endsWith('.js'));
  if (argv[0] !== 'node' || script < 1)
    throw new Error(`Dockerfile: ENTRYPOINT ${entry[1]} is not node <flags> <script>`);
  const flags = argv.slice(1, script);

  let nodeOptions: string | undefined;
  for (const doc of parseAllDocuments(readFileSync(join(root, 'config/manager/manager.yaml'), 'utf8'))) {
    const o = doc.toJS() as {
      kind?: string;
      spec?: { template?: { spec?: { containers?: { env?: { name: string; value?: string }[] }[] } } };
    } | null;
    if (o?.kind !== 'Deployment') continue;
    for (const c of o.spec?.template?.spec?.containers ?? [])
      nodeOptions ??= c.env?.find((e) => e.name === 'NODE_OPTIONS')?.value;
  }
  if (nodeOptions === undefined)
    throw new Error('config/manager/manager.yaml: no NODE_OPTIONS in the Deployment');
  return { flags, nodeOptions };
}
