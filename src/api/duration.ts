/**
 * The duration grammar shared by `Provider.spec.timeout` and the command-line flags: Go-style
 * `time.Duration` strings restricted to the units a controller needs.
 */

/** Parses a Go-style duration (`500ms`, `15s`, `1m30s`, `2h`) to milliseconds; throws on bad input. */
export function parseDuration(s: string): number {
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h)/gy;
  let total = 0;
  let matched = 0;
  for (let m = re.exec(s); m; m = re.exec(s)) {
    const n = Number(m[1]);
    const unit = m[2];
    total += n * (unit === 'ms' ? 1 : unit === 's' ? 1000 : unit === 'm' ? 60_000 : 3_600_000);
    matched = re.lastIndex;
  }
  if (s.length === 0 || matched !== s.length) {
    throw new Error(`invalid duration ${JSON.stringify(s)}: use forms like 500ms, 15s, 1m30s, 2h`);
  }
  return Math.round(total);
}
