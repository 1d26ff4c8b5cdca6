/** The origin (`scheme://host[:port]`) of `url`, or `url` itself when it does not parse. */
export function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return url;
  }
}
