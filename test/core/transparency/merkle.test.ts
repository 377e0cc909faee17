// The run log's Merkle tree (core/transparency/merkle.ts): RFC 6962 / RFC 9162 hashing, inclusion and
// consistency proofs, planned from stored perfect subtrees and verified by the RFC's algorithms.
//
// Known answers: transcribed from the certificate-transparency project's test data as Debian ships it in
// golang-github-google-certificate-transparency-dev (0.0~git20160709.0.0f6e3d1~ds1-3):
//   go/merkletree/tree_hasher_test.go   (leaf and node hash vectors)
//   cpp/merkletree/merkle_tree_test.go  (kInputs, kSHA256Roots, kSHA256Paths, kSHA256Proofs;
//                                       "Generated from ReferenceMerklePath / ReferenceSnapshotConsistency")
// The C++ test names leaves from 1 (PathToRootAtSnapshot(leaf, snapshot)); RFC 9162 and this code from 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  completedBy,
  consistencyRanges,
  emptyRoot,
  inclusionRanges,
  leafHash,
  nodeHash,
  rangeHash,
  rootNodes,
  rootOf,
  verifyConsistency,
  verifyInclusion,
  type NodeId,
} from '../../../core/transparency/merkle.ts';

const hex = (s: string) => Uint8Array.from(Buffer.from(s, 'hex'));
const toHex = (b: Uint8Array) => Buffer.from(b).toString('hex');

const INPUTS = ['', '00', '10', '2021', '3031', '40414243', '5051525354555657', '606162636465666768696a6b6c6d6e6f'].map(hex);
const ROOTS = [
  '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
  'fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125',
  'aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77',
  'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
  '4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4',
  '76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef',
  'ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c',
  '5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328',
];
// kSHA256Paths: { leaf (1-based), snapshot, path }
const PATHS: { leaf: number; size: number; path: string[] }[] = [
  {
    leaf: 1,
    size: 8,
    path: [
      '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4',
    ],
  },
  {
    leaf: 6,
    size: 8,
    path: [
      'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
      'ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0',
      'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
    ],
  },
  { leaf: 3, size: 3, path: ['fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125'] },
  {
    leaf: 2,
    size: 5,
    path: [
      '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
    ],
  },
];
// kSHA256Proofs: { snapshot1, snapshot2, proof }
const PROOFS: { first: number; second: number; proof: string[] }[] = [
  { first: 1, second: 1, proof: [] },
  {
    first: 1,
    second: 8,
    proof: [
      '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4',
    ],
  },
  {
    first: 6,
    second: 8,
    proof: [
      '0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a',
      'ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0',
      'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
    ],
  },
  {
    first: 2,
    second: 5,
    proof: [
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
    ],
  },
];

const LEAVES = INPUTS.map((d) => leafHash(d));

/** A stored log: every perfect node's hash by (level, index), as the cell keeps them. */
function store(leaves: readonly Uint8Array[]): (n: NodeId) => Uint8Array {
  const nodes = new Map<string, Uint8Array>();
  leaves.forEach((h, i) => {
    for (const id of completedBy(i)) {
      const hash =
        id.level === 0 ? h : nodeHash(nodes.get(`${id.level - 1}:${id.index * 2}`)!, nodes.get(`${id.level - 1}:${id.index * 2 + 1}`)!);
      nodes.set(`${id.level}:${id.index}`, hash);
    }
  });
  return (n) => {
    const h = nodes.get(`${n.level}:${n.index}`);
    if (!h) throw new Error(`node ${n.level}:${n.index} not stored`);
    return h;
  };
}

const proofOf = (ranges: { begin: number; end: number }[], get: (n: NodeId) => Uint8Array) => ranges.map((r) => rangeHash(r, get));

test('leaf and node hashes: the tree hasher vectors (tree_hasher_test.go)', () => {
  assert.equal(toHex(emptyRoot()), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  assert.equal(toHex(leafHash(hex(''))), '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d');
  assert.equal(toHex(leafHash(hex('00'))), '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7');
  assert.equal(
    toHex(leafHash(hex('101112131415161718191a1b1c1d1e1f'))),
    '3bfb960453ebaebf33727da7a1f4db38acc051d381b6da20d6d4e88f0eabfd7a',
  );
  assert.equal(
    toHex(
      nodeHash(
        hex('000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f'),
        hex('202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f'),
      ),
    ),
    '1a378704c17da31e2d05b6d121c2bb2c7d76f6ee6fa8f983e596c2d034963c57',
  );
});

test('roots of the first 1..8 test leaves (kSHA256Roots), by the reference MTH and from stored nodes', () => {
  for (let n = 1; n <= 8; n++) {
    assert.equal(toHex(rootOf(LEAVES.slice(0, n))), ROOTS[n - 1], `size ${n}`);
    const get = store(LEAVES.slice(0, n));
    assert.equal(toHex(rangeHash({ begin: 0, end: n }, get)), ROOTS[n - 1], `size ${n} from nodes`);
    assert.ok(rootNodes(n).length >= 1);
  }
  assert.equal(toHex(rootOf([])), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
});

test('inclusion proofs (kSHA256Paths): generated equal to the vectors, and verified by the RFC 9162 algorithm', () => {
  const get = store(LEAVES);
  for (const v of PATHS) {
    const index = v.leaf - 1;
    const proof = proofOf(inclusionRanges(index, v.size), get);
    assert.deepEqual(proof.map(toHex), v.path, `leaf ${index} of ${v.size}`);
    const root = hex(ROOTS[v.size - 1]!);
    assert.equal(verifyInclusion(LEAVES[index]!, index, v.size, v.path.map(hex), root), true);
    // Refused: another leaf, another index, a changed proof hash, a proof of another size, a shortened proof.
    assert.equal(verifyInclusion(LEAVES[(index + 1) % v.size]!, index, v.size, v.path.map(hex), root), false);
    if (v.size > 1) assert.equal(verifyInclusion(LEAVES[index]!, (index + 1) % v.size, v.size, v.path.map(hex), root), false);
    const bent = v.path.map(hex);
    bent[0]![0]! ^= 1;
    assert.equal(verifyInclusion(LEAVES[index]!, index, v.size, bent, root), false);
    assert.equal(verifyInclusion(LEAVES[index]!, index, v.size, v.path.slice(1).map(hex), root), false);
  }
  // The vectors' degenerate cases: a tree of one leaf has an empty path; an index past the size proves nothing.
  assert.deepEqual(inclusionRanges(0, 1), []);
  assert.equal(verifyInclusion(LEAVES[0]!, 0, 1, [], LEAVES[0]!), true);
  assert.equal(verifyInclusion(LEAVES[0]!, 8, 8, [], hex(ROOTS[7]!)), false);
});

test('consistency proofs (kSHA256Proofs): generated equal to the vectors, and verified by the RFC 9162 algorithm', () => {
  const get = store(LEAVES);
  for (const v of PROOFS) {
    const proof = proofOf(consistencyRanges(v.first, v.second), get);
    assert.deepEqual(proof.map(toHex), v.proof, `${v.first} -> ${v.second}`);
    const [r1, r2] = [hex(ROOTS[v.first - 1]!), hex(ROOTS[v.second - 1]!)];
    assert.equal(verifyConsistency(v.first, v.second, v.proof.map(hex), r1, r2), true);
    if (v.first !== v.second) {
      // A rewritten older tree (another first root), a rewritten newer one, a bent proof: all refused.
      assert.equal(verifyConsistency(v.first, v.second, v.proof.map(hex), hex(ROOTS[(v.first + 2) % 8]!), r2), false);
      assert.equal(verifyConsistency(v.first, v.second, v.proof.map(hex), r1, hex(ROOTS[(v.second + 2) % 8]!)), false);
      const bent = v.proof.map(hex);
      bent.at(-1)![31]! ^= 0x80;
      assert.equal(verifyConsistency(v.first, v.second, bent, r1, r2), false);
      assert.equal(verifyConsistency(v.first, v.second, [], r1, r2), false);
    }
  }
  // Every tree extends the empty one; a smaller newer tree extends nothing.
  assert.equal(verifyConsistency(0, 8, [], emptyRoot(), hex(ROOTS[7]!)), true);
  assert.equal(verifyConsistency(0, 8, [LEAVES[0]!], emptyRoot(), hex(ROOTS[7]!)), false);
  assert.equal(verifyConsistency(8, 5, [], hex(ROOTS[7]!), hex(ROOTS[4]!)), false);
});

test('property: for every size up to 70, every inclusion and consistency proof from stored nodes verifies against the reference root', () => {
  const leaves = Array.from({ length: 70 }, (_, i) => leafHash(Uint8Array.of(i, i >> 8, 7)));
  const get = store(leaves);
  const roots = [emptyRoot(), ...leaves.map((_, i) => rootOf(leaves.slice(0, i + 1)))];
  for (let n = 1; n <= 70; n++) {
    assert.equal(toHex(rangeHash({ begin: 0, end: n }, get)), toHex(roots[n]!));
    for (let i = 0; i < n; i++) assert.equal(verifyInclusion(leaves[i]!, i, n, proofOf(inclusionRanges(i, n), get), roots[n]!), true);
    for (let m = 0; m <= n; m++)
      assert.equal(verifyConsistency(m, n, proofOf(consistencyRanges(m, n), get), roots[m]!, roots[n]!), true, `${m} -> ${n}`);
  }
});

test('property: a proof with any one hash changed never verifies', () => {
  const leaves = Array.from({ length: 40 }, (_, i) => leafHash(Uint8Array.of(i)));
  const get = store(leaves);
  const roots = [emptyRoot(), ...leaves.map((_, i) => rootOf(leaves.slice(0, i + 1)))];
  fc.assert(
    fc.property(fc.integer({ min: 2, max: 40 }), fc.nat(), fc.nat(), fc.integer({ min: 0, max: 255 }), (n, a, b, bit) => {
      const m = 1 + (a % (n - 1));
      const proof = proofOf(consistencyRanges(m, n), get);
      const i = b % proof.length;
      proof[i] = Uint8Array.from(proof[i]!);
      proof[i]![bit % 32]! ^= 1 << (bit % 8);
      assert.equal(verifyConsistency(m, n, proof, roots[m]!, roots[n]!), false);
      const j = a % n;
      const inc = proofOf(inclusionRanges(j, n), get);
      if (inc.length > 0) {
        inc[b % inc.length] = Uint8Array.from(inc[b % inc.length]!);
        inc[b % inc.length]![bit % 32]! ^= 1 << (bit % 8);
        assert.equal(verifyInclusion(leaves[j]!, j, n, inc, roots[n]!), false);
      }
    }),
    { numRuns: 300 },
  );
});
