/** Random resource ids: a type prefix and 80 bits of randomness, hex. */
export function newId(prefix: string): string {
  const b = crypto.getRandomValues(new Uint8Array(10));
  return `${prefix}_${Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')}`;
}

/** Bounds-checked id path parameter pattern shared by routes. */
export const ID_PATTERN = /^[a-z]{2,8}_[0-9a-f]{20}$/;
