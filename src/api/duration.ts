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

/** A tenant's duration as used: milliseconds, and why it differs from what is stored, if it does. */
export interface BoundedDuration {
  /** The duration used, ms, within `[minMs, maxMs]`. */
  ms: number;
  /** Set when the stored value was above the ceiling (stored before the CRD rule): says so. */
  note?: string;
}

/**
 * `raw` (a Go duration of field `field`, e.g. `spec.interval`) held to `[minMs, maxMs]`: a shorter
 * one is raised to `minMs`, an unparsable one is `fallbackMs`, and one above `maxMs` (only stored
 * before the CRD had its ceiling) is lowered to it with a `note` naming the field, the value
 * and the ceiling `maxLabel` (e.g. `24h`), for the object's condition.
 */
export function boundedDuration(
  field: string,
  raw: string,
  o: { minMs: number; maxMs: number; maxLabel: string; fallbackMs: number },
): BoundedDuration {
  let ms: number;
  try {
    ms = parseDuration(raw);
  } catch {
    ms = o.fallbackMs;
  }
  if (ms > o.maxMs) {
    return {
      ms: o.maxMs,
      note: `${field} ${raw} is above the ${o.maxLabel} ceiling and is not obeyed: ${o.maxLabel} is used; set ${o.maxLabel} or less`,
    };
  }
  return { ms: Math.max(o.minMs, ms) };
}
