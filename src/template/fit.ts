/**
 * Commit status contexts that fit a forge's limit without colliding (Bitbucket keys are ≤ 40
 * characters): the one fitting rule that is not a plain cut (those live in src/text.ts).
 */
import { createHash } from 'node:crypto';
import { measure, prefixTo, type FieldLimit } from '../text.ts';

/**
 * A commit status context that fits `limit`: unchanged when it fits, else a readable prefix plus
 * `~` and the first 10 hex characters of SHA-256 over the whole value (so two long contexts that
 * share a prefix stay distinct).
 */
export function fitContext(s: string, limit: FieldLimit | undefined): string {
  if (limit === undefined || measure(s, limit.unit) <= limit.max) return s;
  const hash = createHash('sha256').update(s).digest('hex').slice(0, 10);
  const suffix = `~${hash}`;
  const room = limit.max - measure(suffix, limit.unit);
  return `${prefixTo(s, room, limit.unit).replace(/[\s/:~._-]+$/, '')}${suffix}`;
}
