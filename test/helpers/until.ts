/**
 * Polls a condition in a test: `fn` until it returns something truthy (its value is returned),
 * 100 ms apart, failing after `ms` with what was awaited. No sleeps where a condition can be waited for.
 */
export async function until<T>(what: string, fn: () => Promise<T | undefined | null | false>, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
