// Signed notes and checkpoints (core/transparency/note.ts, checkpoint.ts).
//
// Known answers transcribed from golang.org/x/mod as Debian ships it (golang-golang-x-mod-dev 0.7.0-1):
//   sumdb/note/example_test.go  the PeterNeumann key (private and verifier key strings) and its signed note
//   sumdb/tlog/note_test.go     TestFormatTree: the go.sum tree note (origin, size, base64 root), the
//                               format C2SP tlog-checkpoint generalises
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPrivateKey } from 'node:crypto';
import { b64std, fromB64std } from '../../../core/base64.ts';
import { generateEd25519, publicJwkOf, signEd25519 } from '../../../core/crypto/ed25519.ts';
import { leafHash, rootOf } from '../../../core/transparency/merkle.ts';
import { noteKeyHash, noteVerifierKey, signNote, verifyNote } from '../../../core/transparency/note.ts';
import {
  checkConsistent,
  checkpointText,
  parseCheckpointText,
  signCheckpoint,
  verifyCheckpoint,
} from '../../../core/transparency/checkpoint.ts';

const utf8 = (s: string) => new TextEncoder().encode(s);

// "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz": base64(0x01 || seed).
const seed = fromB64std('AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz').subarray(1);
const peterPrivate = createPrivateKey({
  key: Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed]),
  format: 'der',
  type: 'pkcs8',
}).export({ format: 'jwk' }) as JsonWebKey;
const peterPublic = publicJwkOf(peterPrivate);
const TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
const SIGNED = TEXT + '\n— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n';

test('signed note: the x/mod example key, verifier key string and signature', async () => {
  assert.equal(noteVerifierKey('PeterNeumann', peterPublic), 'PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW');
  assert.equal(Buffer.from(noteKeyHash('PeterNeumann', peterPublic)).toString('hex'), 'c74f20a3');
  const note = await signNote(TEXT, [{ name: 'PeterNeumann', publicJwk: peterPublic, sign: (b) => signEd25519(peterPrivate, b) }]);
  assert.equal(note, SIGNED);
  const v = await verifyNote(SIGNED, [{ name: 'PeterNeumann', publicJwk: peterPublic }]);
  assert.equal(v.ok, true);
  if (v.ok) assert.equal(v.note.text, TEXT);
});

test('signed note: refused when the text, the signature or the key is not the signed one', async () => {
  const trusted = [{ name: 'PeterNeumann', publicJwk: peterPublic }];
  const other = await generateEd25519();
  const cases: [string, string, typeof trusted][] = [
    ['a changed text', SIGNED.replace('answer', 'answers'), trusted],
    ['a changed signature', SIGNED.replace('x08go', 'x08gp'), trusted],
    ['no signature line', TEXT + '\n', trusted],
    ['no blank line', TEXT + '— PeterNeumann x08go/ZJku\n', trusted],
    ['a key of another name', SIGNED, [{ name: 'Someone', publicJwk: peterPublic }]],
    ['another key of that name', SIGNED, [{ name: 'PeterNeumann', publicJwk: other.publicJwk }]],
    ['a malformed line', SIGNED.replace('— PeterNeumann ', '-- PeterNeumann '), trusted],
  ];
  for (const [what, note, keys] of cases) assert.equal((await verifyNote(note, keys)).ok, false, what);
  // A line of an unknown key is ignored; the known one still verifies.
  const extra = SIGNED + '— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n';
  assert.equal((await verifyNote(extra, trusted)).ok, true);
});

test('checkpoint text: the go.sum tree note of TestFormatTree, parsed back', () => {
  const root = leafHash(utf8('hello world'));
  const text = checkpointText({ origin: 'go.sum database tree', size: 123456789012, root, extensions: [] });
  assert.equal(text, 'go.sum database tree\n123456789012\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n');
  const back = parseCheckpointText(text);
  assert.equal(back?.size, 123456789012);
  assert.equal(b64std(back!.root), 'TszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=');
  for (const bad of [
    'go.sum database tree\n0xabcdef\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n',
    'go.sum database tree\n123456789012\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBTOOBIG=\n',
    'go.sum database tree\n0123\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n',
    'go.sum database tree\n123\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=',
  ])
    assert.equal(parseCheckpointText(bad), null, bad);
});

test('checkpoints: signed by the log key named after the origin; consistency between two of one log', async () => {
  const kp = await generateEd25519();
  const keys = [{ kid: kp.kid, jwk: kp.publicJwk }];
  const signer = { name: 'agent-cell/grp', publicJwk: kp.publicJwk, sign: (b: Uint8Array) => signEd25519(kp.privateJwk, b) };
  const leaves = [1, 2, 3, 4, 5].map((i) => leafHash(Uint8Array.of(i)));
  const c3 = await signCheckpoint({ origin: 'agent-cell/grp', size: 3, root: rootOf(leaves.slice(0, 3)), extensions: [] }, [signer]);
  const c5 = await signCheckpoint({ origin: 'agent-cell/grp', size: 5, root: rootOf(leaves), extensions: [] }, [signer]);
  assert.match(c5, /^agent-cell\/grp\n5\n[A-Za-z0-9+/]{43}=\n\n— agent-cell\/grp [A-Za-z0-9+/]+=*\n$/);
  assert.equal((await verifyCheckpoint(c5, 'agent-cell/grp', keys)).ok, true);
  assert.equal((await verifyCheckpoint(c5, 'agent-cell/other', keys)).ok, false, 'another origin');
  assert.equal((await verifyCheckpoint(c5.replace('\n5\n', '\n6\n'), 'agent-cell/grp', keys)).ok, false, 'a changed size');
  // Consistency: the proof for 3 -> 5 of this tree holds; the same proof against a rewritten tree does not.
  const { consistencyRanges, rangeHash } = await import('../../../core/transparency/merkle.ts');
  const proofFor = (ls: Uint8Array[]) =>
    consistencyRanges(3, 5).map((r) => b64std(rangeHash(r, (n) => rootOf(ls.slice(n.index * 2 ** n.level, (n.index + 1) * 2 ** n.level)))));
  const ok = await checkConsistent(c3, c5, 'agent-cell/grp', keys, { first: 3, second: 5, proof: proofFor(leaves) });
  assert.equal(ok.ok, true);
  const rewritten = [...leaves];
  rewritten[1] = leafHash(Uint8Array.of(99));
  const c5b = await signCheckpoint({ origin: 'agent-cell/grp', size: 5, root: rootOf(rewritten), extensions: [] }, [signer]);
  const bad = await checkConsistent(c3, c5b, 'agent-cell/grp', keys, { first: 3, second: 5, proof: proofFor(rewritten) });
  assert.equal(bad.ok, false);
  if (!bad.ok) assert.match(bad.reason, /history rewritten/);
  assert.equal((await checkConsistent(c5, c3, 'agent-cell/grp', keys, undefined)).ok, false, 'a smaller newer tree');
  assert.equal((await checkConsistent(c3, c5, 'agent-cell/grp', keys, undefined)).ok, false, 'no proof');
});
