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
  /** Where lines go; default stdout. Tests pass a stream to scan output for secrets. */
  destination?: NodeJS.WritableStream;
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const options = {
    level: opts.level ?? 'info',
    base: { controller: 'pko-notification-controller' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
  };
  return opts.destination ? pino(options, opts.destination) : pino(options);
}
