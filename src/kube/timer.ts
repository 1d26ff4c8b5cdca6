/**
 * The one clamp every timer of the controller goes through. Node's `setTimeout` takes a signed
 * 32-bit delay: a longer one (over ~24.8 days) fires after 1 ms with a TimeoutOverflowWarning,
 * and NaN fires at once too, so a long duration a tenant writes would become a hot loop.
 */

/** Largest delay Node's `setTimeout` honours, ms (2^31 − 1, about 24.8 days). */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * `ms` as a delay a timer can arm, ms: below 0 → 0; above {@link MAX_TIMER_MS}, `Infinity` or
 * `NaN` → {@link MAX_TIMER_MS}. A timer capped this way fires early; callers that must wait
 * longer re-arm for the rest (the work queue does) or re-check when it fires.
 */
export function timerDelay(ms: number): number {
  if (Number.isNaN(ms)) return MAX_TIMER_MS;
  return Math.min(MAX_TIMER_MS, Math.max(0, ms));
}
