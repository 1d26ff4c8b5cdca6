/**
 * JSON logging (pino). One root logger per process; components take a child with
 * `{ component }`. Secret-bearing fields are redacted by path as a second line of defence —
 * the first is never putting secrets in log objects (see src/credential/redact.ts).
 */
import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;

/** Paths whose values are replaced by `[redacted]` in every log line. */
const REDACT_PATHS = [
  'token',
  'password',
  'authorization',
  'headers.authorization',
  'headers.Authorization',
  '*.token',
  '*.password',
  '*.authorization',
  'secret',
  '*.secret',
  'address',
  '*.address',
];

export interface LoggerOptions {
  level?: LevelWithSilent;
  /** Redacts known secret values from every message and string field (src/credential/redact.ts). */
  redactor?: { redact(text: string): string };
  /** Where lines go; default stdout. Tests pass a stream to scan output for secrets. */
  destination?: NodeJS.WritableStream;
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const redactor = opts.redactor;
  const options = {
    level: opts.level ?? 'info',
    ...(redactor
      ? {
          hooks: {
            logMethod(this: Logger, args: unknown[], method: (...a: unknown[]) => void): void {
              method.apply(
                this,
                args.map((a) => {
                  if (typeof a === 'string') return redactor.redact(a);
                  if (a !== null && typeof a === 'object' && !(a instanceof Error)) {
                    const copy: Record<string, unknown> = {};
                    for (const [k, v] of Object.entries(a))
                      copy[k] = typeof v === 'string' ? redactor.redact(v) : v;
                    return copy;
                  }
                  return a;
                }),
              );
            },
          },
        }
      : {}),
    base: { controller: 'pko-notification-controller' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
  };
  return opts.destination ? pino(options, opts.destination) : pino(options);
}
