/**
 * The CBOR (RFC 8949) that COSE_Sign1 needs, and no more: unsigned and
 * negative integers, byte and text strings, arrays, maps, tags, false, true
 * and null. Encoding is deterministic (RFC 8949 section 4.2.1: shortest
 * heads, definite lengths, map keys sorted by their encoded bytes); decoding
 * is strict (the same rules, refused otherwise, with depth and size caps), so
 * a signed structure has one accepted encoding.
 */

/** A CBOR tag around a value (e.g. 18 for COSE_Sign1). */
export class CborTag {
  constructor(
    readonly tag: number,
    readonly value: CborValue,
  ) {}
}

export type CborValue = number | string | Uint8Array | boolean | null | CborValue[] | Map<CborValue, CborValue> | CborTag;

const MAX_DEPTH = 16;

/** Where encoding writes: small heads into `bytes`, long strings as whole chunks (no copy per byte). */
class Out {
  parts: Uint8Array[] = [];
  bytes: number[] = [];
  push(...b: number[]): void {
    for (const x of b) this.bytes.push(x);
  }
  chunk(b: Uint8Array): void {
    if (b.length < 64) {
      for (const x of b) this.bytes.push(x);
      return;
    }
    this.flush();
    this.parts.push(b);
  }
  flush(): void {
    if (this.bytes.length > 0) {
      this.parts.push(Uint8Array.from(this.bytes));
      this.bytes = [];
    }
  }
  result(): Uint8Array {
    this.flush();
    let n = 0;
    for (const p of this.parts) n += p.length;
    const r = new Uint8Array(n);
    let o = 0;
    for (const p of this.parts) {
      r.set(p, o);
      o += p.length;
    }
    return r;
  }
}

function head(major: number, n: number, out: Out): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new TypeError('cbor: length or value out of range');
  const m = major << 5;
  if (n < 24) out.push(m | n);
  else if (n < 0x100) out.push(m | 24, n);
  else if (n < 0x10000) out.push(m | 25, n >> 8, n & 0xff);
  else if (n < 0x100000000) out.push(m | 26, (n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff);
  else {
    const hi = Math.floor(n / 0x100000000);
    const lo = n >>> 0;
    out.push(m | 27, 0, (hi >> 16) & 0xff, (hi >> 8) & 0xff, hi & 0xff, (lo >>> 24) & 0xff, (lo >> 16) & 0xff, (lo >> 8) & 0xff, lo & 0xff);
  }
}

function enc(v: CborValue, out: Out, depth: number): void {
  if (depth > MAX_DEPTH) throw new TypeError('cbor: too deep');
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new TypeError('cbor: only safe integers are encoded');
    if (v >= 0) head(0, v, out);
    else head(1, -1 - v, out);
  } else if (typeof v === 'string') {
    const b = new TextEncoder().encode(v);
    head(3, b.length, out);
    out.chunk(b);
  } else if (v instanceof Uint8Array) {
    head(2, v.length, out);
    out.chunk(v);
  } else if (v === false) out.push(0xf4);
  else if (v === true) out.push(0xf5);
  else if (v === null) out.push(0xf6);
  else if (Array.isArray(v)) {
    head(4, v.length, out);
    for (const x of v) enc(x, out, depth + 1);
  } else if (v instanceof Map) {
    const entries = [...v.entries()].map(([k, x]) => {
      const o = new Out();
      enc(k, o, depth + 1);
      return { kb: o.result(), x };
    });
    entries.sort((a, b) => compareBytes(a.kb, b.kb));
    for (let i = 1; i < entries.length; i++)
      if (compareBytes(entries[i - 1]!.kb, entries[i]!.kb) === 0) throw new TypeError('cbor: duplicate map key');
    head(5, entries.length, out);
    for (const e of entries) {
      out.chunk(e.kb);
      enc(e.x, out, depth + 1);
    }
  } else if (v instanceof CborTag) {
    head(6, v.tag, out);
    enc(v.value, out, depth + 1);
  } else throw new TypeError('cbor: unsupported value');
}

function compareBytes(a: readonly number[] | Uint8Array, b: readonly number[] | Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

/** Deterministic CBOR of a value. @throws TypeError for a value outside the supported set. */
export function cborEncode(v: CborValue): Uint8Array {
  const out = new Out();
  enc(v, out, 0);
  return out.result();
}

/** Thrown (and only caught inside core) for bytes that are not strict deterministic CBOR. */
class Malformed extends Error {}

/**
 * Decodes strict deterministic CBOR; null when the bytes are anything else (indefinite lengths,
 * non-shortest heads, unsorted or duplicate map keys, floats, trailing bytes, too deep).
 */
export function cborDecode(bytes: Uint8Array): CborValue | null {
  let at = 0;
  const byte = (): number => {
    if (at >= bytes.length) throw new Malformed();
    return bytes[at++]!;
  };
  const arg = (info: number): number => {
    if (info < 24) return info;
    const size = info === 24 ? 1 : info === 25 ? 2 : info === 26 ? 4 : info === 27 ? 8 : 0;
    if (size === 0) throw new Malformed();
    let n = 0;
    for (let i = 0; i < size; i++) n = n * 256 + byte();
    if (!Number.isSafeInteger(n)) throw new Malformed();
    const min = size === 1 ? 24 : size === 2 ? 0x100 : size === 4 ? 0x10000 : 0x100000000;
    if (n < min) throw new Malformed();
    return n;
  };
  const take = (n: number): Uint8Array => {
    if (at + n > bytes.length) throw new Malformed();
    const b = bytes.subarray(at, at + n);
    at += n;
    return b;
  };
  const item = (depth: number): CborValue => {
    if (depth > MAX_DEPTH) throw new Malformed();
    const ib = byte();
    const major = ib >> 5;
    const info = ib & 31;
    switch (major) {
      case 0:
        return arg(info);
      case 1:
        return -1 - arg(info);
      case 2:
        return Uint8Array.from(take(arg(info)));
      case 3: {
        const b = take(arg(info));
        try {
          return new TextDecoder('utf-8', { fatal: true }).decode(b);
        } catch {
          throw new Malformed();
        }
      }
      case 4: {
        const n = arg(info);
        if (n > bytes.length - at) throw new Malformed();
        const a: CborValue[] = [];
        for (let i = 0; i < n; i++) a.push(item(depth + 1));
        return a;
      }
      case 5: {
        const n = arg(info);
        if (n > bytes.length - at) throw new Malformed();
        const m = new Map<CborValue, CborValue>();
        let prev: Uint8Array | null = null;
        for (let i = 0; i < n; i++) {
          const ks = at;
          const k = item(depth + 1);
          const kb = bytes.subarray(ks, at);
          if (prev !== null && compareBytes(prev, kb) >= 0) throw new Malformed();
          prev = kb;
          m.set(k, item(depth + 1));
        }
        return m;
      }
      case 6:
        return new CborTag(arg(info), item(depth + 1));
      default:
        if (ib === 0xf4) return false;
        if (ib === 0xf5) return true;
        if (ib === 0xf6) return null;
        throw new Malformed();
    }
  };
  try {
    const v = item(0);
    return at === bytes.length ? v : null;
  } catch (e) {
    if (e instanceof Malformed) return null;
    throw e;
  }
}
