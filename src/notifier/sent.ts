/**
 * Whether a request reached the wire: the fact that separates an `unreachable` failure (nothing
 * was sent: safe to send again) from an `ambiguous` one (a timeout or reset after the request was
 * written: the endpoint may have acted on it; ./classify.ts). undici reports it to the request's
 * handler (`onRequestSent`, after the last byte of the request is written); a dispatcher composed
 * per request over the Provider's own records it, without touching undici or any global.
 */
import type { Dispatcher } from 'undici';

/** Per request: set once undici has written the whole request. */
export interface SendState {
  sent: boolean;
}

/**
 * A dispatcher that sends through `base` (its connections, TLS and proxy) and sets `state.sent`
 * when the request has been written. Cheap: it holds no connections of its own.
 */
export function trackingDispatcher(base: Dispatcher, state: SendState): Dispatcher {
  return base.compose(
    (dispatch) => (opts, handler) =>
      dispatch(
        opts,
        new Proxy(handler, {
          get(target, prop, receiver) {
            if (prop === 'onRequestSent') {
              return (...args: unknown[]) => {
                state.sent = true;
                const own = (target as { onRequestSent?: (...a: unknown[]) => unknown }).onRequestSent;
                return own?.apply(target, args);
              };
            }
            const v: unknown = Reflect.get(target, prop, receiver);
            return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
          },
        }),
      ),
  );
}
