/**
 * `node:http`, loaded with `require`. In an ES module, `import … from 'node:http'` builds the
 * module's namespace from every export, and Node 24's `http` exports `WebSocket`, `CloseEvent`
 * and `MessageEvent` as getters that load Node's own bundled undici (745 KB of source) for
 * classes the controller never uses: in a fresh Node 24 (`--max-semi-space-size=2`) the import
 * costs 14.5 MiB of resident memory against 2.2 MiB for `require` — less inside the controller,
 * which loads much of the same anyway (docs/benchmarks.md, issue 21's seventh pass). `require`
 * returns the module object itself, whose getters stay lazy.
 */
import { createRequire } from 'node:module';
import type * as Http from 'node:http';

const http = createRequire(import.meta.url)('node:http') as typeof Http;

export const { createServer, STATUS_CODES } = http;
export type { IncomingMessage, Server, ServerResponse } from 'node:http';
