/**
 * A Microsoft Teams Workflows webhook contract server ("When a Teams webhook request is received"
 * → "Post card in a chat or channel"), answering as the Power Automate request trigger does:
 * - `POST /powerautomate/automations/direct/workflows/<id>/triggers/manual/paths/invoke?api-version=1&sp=…&sv=1.0&sig=<sig>`;
 *   a missing `sig` is 401 `DirectApiAuthorizationRequired`, a wrong one 401
 *   `DirectApiInvalidAuthorizationSignature` (Azure Logic Apps request-trigger answers, envelope
 *   `{"error": {"code", "message"}}`); an unknown workflow 404 `WorkflowNotFound`;
 * - accepted requests answer 202 with an empty body and the flow runs afterwards (Logic Apps
 *   "asynchronous request-response"): what the flow does with the card is recorded in `runs`,
 *   never in the answer;
 * - throttling: more than 4 requests in one second → 429 with `Retry-After` (Teams "Rate
 *   limiting for connectors/webhooks": 4 requests per second);
 * - the flow's card checks (Teams "Send Adaptive Cards using an Incoming Webhook", Adaptive Card
 *   schema 1.4): `type: "message"`, one attachment of contentType
 *   `application/vnd.microsoft.card.adaptive` whose `content` is an `AdaptiveCard` of version ≤
 *   1.4; body elements of 1.4 types with their enum values; `Action.OpenUrl` with an http(s)
 *   `url`; the whole request ≤ 28 KB (28,672 bytes: Teams "message size limit 28 KB") — a run
 *   whose card breaks one of them is `Failed` with the reason.
 */
import { json, startKitServer, type ForgeRequest, type KitServer, type Reply } from '../forge/kit.ts';

export interface TeamsRun {
  status: 'Succeeded' | 'Failed';
  error?: string;
  /** The posted card (the attachment's `content`) when the run succeeded. */
  card?: Record<string, unknown>;
  bytes: number;
}

export interface TeamsServer extends KitServer {
  /** The workflow URL (secret: it carries `sig`). */
  workflowURL: string;
  runs: TeamsRun[];
}

export const TEAMS_MAX_BYTES = 28 * 1024;
const WORKFLOW = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';
const SIG = 'Zm9vYmFyc2lnbmF0dXJlMDEyMzQ1Njc4OWFiY2RlZg';

const TEXT_ENUMS: Record<string, readonly string[]> = {
  color: ['Default', 'Dark', 'Light', 'Accent', 'Good', 'Warning', 'Attention'],
  size: ['Default', 'Small', 'Medium', 'Large', 'ExtraLarge'],
  weight: ['Default', 'Lighter', 'Bolder'],
  fontType: ['Default', 'Monospace'],
  spacing: ['None', 'Small', 'Default', 'Medium', 'Large', 'ExtraLarge', 'Padding'],
};
const ELEMENT_TYPES_1_4 = new Set([
  'TextBlock',
  'Image',
  'Media',
  'RichTextBlock',
  'Container',
  'ColumnSet',
  'FactSet',
  'ImageSet',
  'ActionSet',
]);

/** Why the flow could not post `body`, or undefined when it could. */
function cardProblem(body: unknown): string | undefined {
  if (body === null || typeof body !== 'object') return 'the request body is not a JSON object';
  const b = body as { type?: unknown; attachments?: unknown };
  if (b.type !== 'message') return 'type must be "message"';
  if (!Array.isArray(b.attachments) || b.attachments.length !== 1) return 'exactly one attachment expected';
  const a = b.attachments[0] as { contentType?: unknown; content?: unknown };
  if (a.contentType !== 'application/vnd.microsoft.card.adaptive')
    return 'attachment contentType is not an Adaptive Card';
  const c = a.content as { type?: unknown; version?: unknown; body?: unknown; actions?: unknown } | undefined;
  if (c?.type !== 'AdaptiveCard') return 'content.type must be AdaptiveCard';
  if (typeof c.version !== 'string' || !/^1\.[0-4]$/.test(c.version))
    return `card version ${String(c.version)} is above 1.4`;
  if (!Array.isArray(c.body)) return 'card body must be an array';
  for (const el of c.body as Record<string, unknown>[]) {
    if (typeof el.type !== 'string' || !ELEMENT_TYPES_1_4.has(el.type))
      return `unknown element type ${String(el.type)}`;
    if (el.type === 'TextBlock') {
      if (typeof el.text !== 'string') return 'TextBlock.text must be a string';
      for (const [k, allowed] of Object.entries(TEXT_ENUMS)) {
        if (el[k] !== undefined && !allowed.includes(el[k] as string))
          return `TextBlock.${k} ${JSON.stringify(el[k])} is not allowed`;
      }
    }
  }
  if (c.actions !== undefined) {
    if (!Array.isArray(c.actions)) return 'actions must be an array';
    for (const act of c.actions as Record<string, unknown>[]) {
      if (act.type !== 'Action.OpenUrl') return `unsupported action ${String(act.type)}`;
      if (typeof act.url !== 'string' || !/^https?:\/\//.test(act.url))
        return 'Action.OpenUrl needs an http(s) url';
    }
  }
  return undefined;
}

export async function startTeamsServer(): Promise<TeamsServer> {
  const runs: TeamsRun[] = [];
  const recent: number[] = [];
  const invoke = (req: ForgeRequest, m: RegExpExecArray): Reply => {
    const sig = req.query.get('sig');
    if (sig === null)
      return json(401, {
        error: {
          code: 'DirectApiAuthorizationRequired',
          message: 'The request must be authenticated only by Shared Access scheme.',
        },
      });
    if (sig !== SIG)
      return json(401, {
        error: {
          code: 'DirectApiInvalidAuthorizationSignature',
          message: 'The provided request signature is not valid.',
        },
      });
    if (m[1] !== WORKFLOW)
      return json(404, { error: { code: 'WorkflowNotFound', message: 'The workflow was not found.' } });
    const now = Date.now();
    while (recent.length > 0 && (recent[0] ?? 0) <= now - 1000) recent.shift();
    if (recent.length >= 4) {
      return json(
        429,
        { error: { code: 'TooManyRequests', message: 'Rate limit is exceeded.' } },
        { 'Retry-After': '1' },
      );
    }
    recent.push(now);
    const bytes = Buffer.byteLength(req.body, 'utf8');
    const problem =
      bytes > TEAMS_MAX_BYTES ? `request is ${String(bytes)} bytes, over 28 KB` : cardProblem(req.json);
    runs.push(
      problem === undefined
        ? {
            status: 'Succeeded',
            bytes,
            card: (
              (req.json as { attachments: { content: Record<string, unknown> }[] }).attachments[0] ?? {
                content: {},
              }
            ).content,
          }
        : { status: 'Failed', error: problem, bytes },
    );
    return { status: 202, text: '' };
  };
  const kit = await startKitServer([
    [
      'POST',
      /^\/powerautomate\/automations\/direct\/workflows\/([0-9a-f]+)\/triggers\/manual\/paths\/invoke$/,
      invoke,
    ],
  ]);
  return {
    ...kit,
    runs,
    workflowURL: `${kit.url}/powerautomate/automations/direct/workflows/${WORKFLOW}/triggers/manual/paths/invoke?api-version=1&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=${SIG}`,
  };
}
