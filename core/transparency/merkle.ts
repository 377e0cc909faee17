/**
 * The Merkle tree of an append-only log, as RFC 9162 (Certificate
 * Transparency 2.0, section 2.1; the same hashing as RFC 6962) defines it:
 * a leaf's hash is SHA-256(0x00 || data), an interior node's
 * SHA-256(0x01 || left || right), and the tree over n leaves splits at the
 * largest power of two below n. The empty tree's hash is SHA-256 of nothing.
 *
 * Proofs are planned as the subtrees (ranges of leaves) whose hashes they
 * list (`inclusionRanges`, `consistencyRanges`), so a log that stores the
 * hash of every perfect subtree (`perfectNodes`) answers any proof with a
 * handful of reads and no rehashing of the whole tree (`rangeHash`). The
 * verifiers (`verifyInclusion`, `verifyConsistency`) are the RFC 9162
 * algorithms of sections 2.1.3.2 and 2.1.4.2, written as the RFC says them.
 *
 * Pure: SHA-256 is @noble/hashes unless the caller passes a native one.
 */
import { sha256 as nobleSha256 } from '@noble/hashes/sha2.js';

/** A synchronous SHA-256 of bytes (node:crypto's may be passed in by a host; the default is @noble/hashes). */
export type Sha256 = (bytes: Uint8Array) => Uint8Array;

const defaultSha: Sha256 = (b) => nobleSha256(b);

/** A leaf range [begin, end) of the tree: a subtree when the proof planners return it. */
export interface Range {
  begin: number;
  end: number;
}

/** A perfect subtree: 2^level leaves starting at leaf index * 2^level. Level 0 is a leaf. */
export interface NodeId {
  level: number;
  index: number;
}

/** SHA-256(0x00 || data): the hash of a leaf (RFC 9162 section 2.1.1). */
export function leafHash(data: Uint8Array, sha256: Sha256 = defaultSha): Uint8Array {
  const b = new Uint8Array(data.length + 1);
  b[0] = 0x00;
  b.set(data, 1);
  return sha256(b);
}

/** SHA-256(0x01 || left || right): the hash of an interior node (RFC 9162 section 2.1.1). */
export function nodeHash(left: Uint8Array, right: Uint8Array, sha256: Sha256 = defaultSha): Uint8Array {
  const b = new Uint8Array(1 + left.length + right.length);
  b[0] = 0x01;
  b.set(left, 1);
  b.set(right, 1 + left.length);
  return sha256(b);
}

/** The hash of the empty tree: SHA-256 of the empty string. */
export function emptyRoot(sha256: Sha256 = defaultSha): Uint8Array {
  return sha256(new Uint8Array(0));
}

/** The largest power of two strictly below n (n >= 2). */
function splitOf(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

function checkSize(n: number, what: string): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new TypeError(`${what} must be a non-negative safe integer`);
}

/** MTH(D[n]) of RFC 9162 over leaf hashes already computed (the reference definition; O(n)). */
export function rootOf(leafHashes: readonly Uint8Array[], sha256: Sha256 = defaultSha): Uint8Array {
  if (leafHashes.length === 0) return emptyRoot(sha256);
  const mth = (lo: number, hi: number): Uint8Array => {
    if (hi - lo === 1) return leafHashes[lo]!;
    const k = splitOf(hi - lo);
    return nodeHash(mth(lo, lo + k), mth(lo + k, hi), sha256);
  };
  return mth(0, leafHashes.length);
}

/**
 * The subtrees whose hashes make the inclusion proof of leaf `index` in a tree of `size`
 * leaves, in proof order (from the leaf's sibling up): PATH(m, D[n]) of RFC 9162 2.1.3.1.
 */
export function inclusionRanges(index: number, size: number): Range[] {
  checkSize(index, 'index');
  checkSize(size, 'size');
  if (index >= size) throw new TypeError('inclusionRanges: index must be below size');
  const out: Range[] = [];
  const path = (m: number, lo: number, hi: number): void => {
    if (hi - lo <= 1) return;
    const k = splitOf(hi - lo);
    if (m < k) {
      path(m, lo, lo + k);
      out.push({ begin: lo + k, end: hi });
    } else {
      path(m - k, lo + k, hi);
      out.push({ begin: lo, end: lo + k });
    }
  };
  path(index, 0, size);
  return out;
}

/**
 * The subtrees whose hashes make the consistency proof from a tree of `first` leaves to one
 * of `second` leaves, in proof order: PROOF(m, D[n]) of RFC 9162 2.1.4.1 (empty when
 * first is 0 or equals second).
 */
export function consistencyRanges(first: number, second: number): Range[] {
  checkSize(first, 'first');
  checkSize(second, 'second');
  if (first > second) throw new TypeError('consistencyRanges: first must not exceed second');
  if (first === 0 || first === second) return [];
  const out: Range[] = [];
  const sub = (m: number, lo: number, hi: number, b: boolean): void => {
    const n = hi - lo;
    if (m === n) {
      if (!b) out.push({ begin: lo, end: hi });
      return;
    }
    const k = splitOf(n);
    if (m <= k) {
      sub(m, lo, lo + k, b);
      out.push({ begin: lo + k, end: hi });
    } else {
      sub(m - k, lo + k, hi, false);
      out.push({ begin: lo, end: lo + k });
    }
  };
  sub(first, 0, second, true);
  return out;
}

/**
 * The perfect subtrees that make up a range, left to right: the hash of a subtree range is
 * these folded from the right (`rangeHash`). A range the planners return starts at a
 * multiple of a power of two no smaller than its length, so this is its RFC split.
 */
export function perfectNodes(r: Range): NodeId[] {
  checkSize(r.begin, 'begin');
  checkSize(r.end, 'end');
  if (r.end <= r.begin) throw new TypeError('perfectNodes: empty range');
  const out: NodeId[] = [];
  let at = r.begin;
  while (at < r.end) {
    let level = 0;
    while (at % 2 ** (level + 1) === 0 && at + 2 ** (level + 1) <= r.end) level++;
    out.push({ level, index: at / 2 ** level });
    at += 2 ** level;
  }
  return out;
}

/** The hash of a subtree range from the hashes of its perfect nodes (`hashOf` answers each of `perfectNodes(r)`). */
export function rangeHash(r: Range, hashOf: (n: NodeId) => Uint8Array, sha256: Sha256 = defaultSha): Uint8Array {
  const nodes = perfectNodes(r);
  let h = hashOf(nodes[nodes.length - 1]!);
  for (let i = nodes.length - 2; i >= 0; i--) h = nodeHash(hashOf(nodes[i]!), h, sha256);
  return h;
}

/**
 * The perfect nodes a log adds when leaf `index` is appended: the leaf (level 0) and every
 * node it completes, bottom up (`index + 1` divisible by 2^level).
 */
export function completedBy(index: number): NodeId[] {
  checkSize(index, 'index');
  const out: NodeId[] = [{ level: 0, index }];
  let level = 1;
  while ((index + 1) % 2 ** level === 0) {
    out.push({ level, index: (index + 1) / 2 ** level - 1 });
    level++;
  }
  return out;
}

/** The perfect nodes the root of a tree of `size` leaves is folded from (its right edge), left to right. */
export function rootNodes(size: number): NodeId[] {
  checkSize(size, 'size');
  return size === 0 ? [] : perfectNodes({ begin: 0, end: size });
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a[i]! ^ b[i]!;
  return d === 0;
}

const odd = (n: number): boolean => n % 2 === 1;
const half = (n: number): number => Math.floor(n / 2);

function hashes(p: readonly Uint8Array[]): boolean {
  return p.every((h) => h instanceof Uint8Array && h.length === 32);
}

/**
 * RFC 9162 section 2.1.3.2: whether `proof` proves the leaf hash `leaf` at `index` in the tree
 * of `size` leaves whose root is `root`. Never throws on hostile input.
 */
export function verifyInclusion(
  leaf: Uint8Array,
  index: number,
  size: number,
  proof: readonly Uint8Array[],
  root: Uint8Array,
  sha256: Sha256 = defaultSha,
): boolean {
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size) return false;
  if (!hashes(proof) || !hashes([leaf, root])) return false;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0) return false;
    if (odd(fn) || fn === sn) {
      r = nodeHash(p, r, sha256);
      if (!odd(fn)) {
        while (!odd(fn) && fn !== 0) {
          fn = half(fn);
          sn = half(sn);
        }
      }
    } else {
      r = nodeHash(r, p, sha256);
    }
    fn = half(fn);
    sn = half(sn);
  }
  return sn === 0 && equal(r, root);
}

/**
 * RFC 9162 section 2.1.4.2: whether `proof` proves that the tree of `first` leaves with root
 * `firstRoot` is a prefix of the tree of `second` leaves with root `secondRoot`. Every tree
 * is consistent with the empty one; equal sizes need an empty proof and equal roots. Never
 * throws on hostile input.
 */
export function verifyConsistency(
  first: number,
  second: number,
  proof: readonly Uint8Array[],
  firstRoot: Uint8Array,
  secondRoot: Uint8Array,
  sha256: Sha256 = defaultSha,
): boolean {
  if (!Number.isSafeInteger(first) || !Number.isSafeInteger(second) || first < 0 || first > second) return false;
  if (!hashes(proof) || !hashes([firstRoot, secondRoot])) return false;
  if (first === 0) return proof.length === 0;
  if (first === second) return proof.length === 0 && equal(firstRoot, secondRoot);
  if (proof.length === 0) return false;
  const path = isPowerOfTwo(first) ? [firstRoot, ...proof] : [...proof];
  let fn = first - 1;
  let sn = second - 1;
  while (odd(fn)) {
    fn = half(fn);
    sn = half(sn);
  }
  let fr = path[0]!;
  let sr = path[0]!;
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (odd(fn) || fn === sn) {
      fr = nodeHash(c, fr, sha256);
      sr = nodeHash(c, sr, sha256);
      if (!odd(fn)) {
        while (!odd(fn) && fn !== 0) {
          fn = half(fn);
          sn = half(sn);
        }
      }
    } else {
      sr = nodeHash(sr, c, sha256);
    }
    fn = half(fn);
    sn = half(sn);
  }
  return equal(fr, firstRoot) && equal(sr, secondRoot) && sn === 0;
}

function isPowerOfTwo(n: number): boolean {
  if (n < 1) return false;
  while (n % 2 === 0) n /= 2;
  return n === 1;
}
