/**
 * The run log (docs/receipts.md, "The log"): an append-only Merkle log
 * (RFC 9162 hashing, core/transparency/merkle.ts) of finished runs' heads,
 * kept in the store, so one log for a whole group of cells on PostgreSQL.
 *
 * A run's end queues its head in its own transaction (`queueTx`, no row that
 * all runs share); the sequencer (`integrate`) then appends the queued heads
 * in one transaction that first locks the log's head row, so appends from
 * every cell of the group are serialized and leaf indexes never collide. It
 * runs 100 ms after a queuing commit (the ends of that interval together), on
 * each heartbeat sweep (heads a stopped cell left queued), at the module's
 * stop, and before any checkpoint or proof is answered for a run still queued.
 * Each append stores the leaf and every perfect subtree it completes, so a
 * proof is a handful of reads (`inclusion`, `consistency`).
 *
 * Checkpoints (C2SP signed notes, core/transparency/checkpoint.ts) of origin
 * `agent-cell/<group id>` are signed with this cell's identity key on demand
 * (Ed25519 is deterministic: the same tree gives the same note from one cell).
 */
import { b64std } from '../../core/base64.ts';
import { signCheckpoint, type LogProof, type ConsistencyProof } from '../../core/transparency/checkpoint.ts';
import {
  completedBy,
  consistencyRanges,
  inclusionRanges,
  nodeHash,
  perfectNodes,
  rangeHash,
  rootNodes,
  type NodeId,
} from '../../core/transparency/merkle.ts';
import { runLeafHash } from '../../core/transparency/run-leaf.ts';
import type { Tx } from '../store/types.ts';
import type { ReceiptsContext } from './context.ts';
import * as repo from './repository.ts';
import { nativeSha256 } from '../../runtime/native-hash.ts';

/** Heads appended per sequencing transaction. */
const BATCH = 500;

const toHex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const fromHex = (h: string): Uint8Array => new Uint8Array(Buffer.from(h, 'hex'));
const key = (n: NodeId): string => `${n.level}:${n.index}`;

/** The log's origin line (and the name of the keys that sign its checkpoints). */
export function logOrigin(ctx: ReceiptsContext): string {
  return `agent-cell/${ctx.core.config.groupId}`;
}

/** Queues a finished run's head in the caller's transaction; the sequencer appends it after the commit. */
export async function queueTx(
  ctx: ReceiptsContext,
  tx: Tx,
  h: { run_id: string; journal_head: string; graph_hash: string },
  source: string,
): Promise<void> {
  await repo.insertPending(tx, { ...h, source, at: ctx.core.clock.now() });
  tx.afterCommit(() => scheduleSoon(ctx));
}

/**
 * How long after a run's end its head waits to be appended (ms): the ends of that interval share one
 * sequencing transaction (one lock of the log's head row for the group, one set of reads), and the
 * run's own end and the next run's start do not wait on it. A checkpoint or a proof asked for
 * meanwhile appends what is queued first (settledHead, proofFor).
 */
const SEQUENCE_AFTER_MS = 100;

/** A sequencing SEQUENCE_AFTER_MS from now, unless one is due already. */
function scheduleSoon(ctx: ReceiptsContext): void {
  if (ctx.soon) return;
  ctx.soon = setTimeout(() => {
    ctx.soon = null;
    schedule(ctx);
  }, SEQUENCE_AFTER_MS);
  ctx.soon.unref?.();
}

/** Starts a sequencing soon (one at a time; another after it when more was queued meanwhile). */
export function schedule(ctx: ReceiptsContext): void {
  if (ctx.integrating) {
    ctx.again = true;
    return;
  }
  ctx.integrating = (async () => {
    let n = 0;
    do {
      ctx.again = false;
      n += await integrateAll(ctx);
    } while (ctx.again);
    return n;
  })()
    .catch((e: unknown) => {
      ctx.core.log.warn('run log sequencing failed', { error: e });
      return 0;
    })
    .finally(() => {
      ctx.integrating = null;
    });
}

/** Appends every queued head (in batches); returns how many were appended. */
export async function integrateAll(ctx: ReceiptsContext): Promise<number> {
  // A read first: with nothing queued (most heartbeats) no transaction is opened and nothing is written.
  if ((await repo.pending(ctx.core.store, 1)).length === 0) return 0;
  let total = 0;
  for (;;) {
    const n = await integrate(ctx);
    total += n;
    if (n < BATCH) return total;
  }
}

/**
 * One sequencing transaction: up to BATCH queued heads appended, in queue order. It holds the
 * log's head row (every cell's sequencing waits for it), so its statements go in four round trips
 * whatever the batch: the lock with the head and the queue; the leaves already logged with the
 * nodes the new ones hash against; every insert, delete and the new head; the COMMIT.
 */
export async function integrate(ctx: ReceiptsContext): Promise<number> {
  const { store, clock } = ctx.core;
  return store.write(
    async (tx) => {
      const at = clock.now();
      const [head, queued] = await Promise.all([repo.lockHead(tx, at), repo.pending(tx, BATCH)]);
      if (queued.length === 0) return 0;
      // A run the log holds already is not appended twice (one leaf per run id).
      const [done, roots] = await Promise.all([
        repo.logged(
          tx,
          queued.map((q) => q.run_id),
        ),
        repo.nodes(tx, rootNodes(head.size), { together: true }),
      ]);
      const fresh = queued.filter((q) => !done.has(q.run_id));
      const known = new Map<string, Uint8Array>();
      for (const [k, h] of roots) known.set(k, fromHex(h));
      const writes: Promise<void>[] = [];
      let size = head.size;
      for (const q of fresh) {
        const leaf = runLeafHash(q, nativeSha256);
        writes.push(repo.insertLeaf(tx, { ...q, idx: size, leaf_hash: toHex(leaf) }));
        for (const n of completedBy(size)) {
          const h =
            n.level === 0
              ? leaf
              : nodeHash(
                  known.get(key({ level: n.level - 1, index: n.index * 2 }))!,
                  known.get(key({ level: n.level - 1, index: n.index * 2 + 1 }))!,
                  nativeSha256,
                );
          known.set(key(n), h);
          writes.push(repo.insertNode(tx, n.level, n.index, toHex(h)));
        }
        size++;
      }
      writes.push(
        repo.deletePending(
          tx,
          queued.map((q) => q.run_id),
        ),
      );
      if (size !== head.size) {
        const root = rangeHash({ begin: 0, end: size }, (n) => known.get(key(n))!, nativeSha256);
        writes.push(repo.setHead(tx, { size, root: toHex(root) }, at));
      }
      await Promise.all(writes);
      return queued.length;
    },
    { isolation: 'row-locks' },
  );
}

/** The hashes of the ranges (proof order), read from the stored perfect nodes. */
async function rangesHashes(ctx: ReceiptsContext, ranges: readonly { begin: number; end: number }[]): Promise<string[]> {
  const ids = ranges.flatMap((r) => perfectNodes(r));
  const got = await repo.nodes(ctx.core.store, ids);
  return ranges.map((r) =>
    b64std(
      rangeHash(
        r,
        (n) => {
          const h = got.get(key(n));
          if (h === undefined) throw new TypeError(`run log: node ${key(n)} is missing`);
          return fromHex(h);
        },
        nativeSha256,
      ),
    ),
  );
}

/** The log's current size and root (hex). */
export function currentHead(ctx: ReceiptsContext): Promise<repo.LogHead> {
  return repo.head(ctx.core.store);
}

/** The log's size and root once every head queued so far is appended (a checkpoint asked for right after a run ends names it). */
export async function settledHead(ctx: ReceiptsContext): Promise<repo.LogHead> {
  await ctx.integrating;
  if ((await repo.pending(ctx.core.store, 1)).length > 0) await integrateAll(ctx);
  return currentHead(ctx);
}

/** The signed checkpoint note of a tree (this cell's identity key, named after the origin). */
export async function checkpointOf(ctx: ReceiptsContext, h: repo.LogHead): Promise<string> {
  const signer = ctx.iam.signer();
  const publicJwk = ctx.iam.identityKeys().find((k) => k.kid === signer.kid)!.jwk;
  const origin = logOrigin(ctx);
  return signCheckpoint({ origin, size: h.size, root: fromHex(h.root), extensions: [] }, [
    { name: origin, publicJwk, sign: (b) => signer.sign(b) },
  ]);
}

/** The run's place in the log with its proof in the current checkpoint; appends its head first when it is still queued. Undefined: not in the log. */
export async function proofFor(ctx: ReceiptsContext, runId: string): Promise<LogProof | undefined> {
  let leaf = await repo.leafByRun(ctx.core.store, runId);
  if (leaf === undefined && (await repo.isPending(ctx.core.store, runId))) {
    await integrateAll(ctx);
    leaf = await repo.leafByRun(ctx.core.store, runId);
  }
  if (leaf === undefined) return undefined;
  const h = await currentHead(ctx);
  return {
    origin: logOrigin(ctx),
    leaf_index: leaf.idx,
    tree_size: h.size,
    inclusion_proof: await rangesHashes(ctx, inclusionRanges(leaf.idx, h.size)),
    checkpoint: await checkpointOf(ctx, h),
  };
}

/** The leaf of a run in the log, as stored (its head), or undefined. */
export function leafOf(ctx: ReceiptsContext, runId: string): Promise<repo.LeafRow | undefined> {
  return repo.leafByRun(ctx.core.store, runId);
}

/** The consistency proof between two sizes of the current tree (first <= second <= size). */
export async function consistency(ctx: ReceiptsContext, first: number, second: number): Promise<ConsistencyProof> {
  return { first, second, proof: await rangesHashes(ctx, consistencyRanges(first, second)) };
}

/** The inclusion proof of a leaf (by hash, hex) in the tree of `size` leaves; undefined when the leaf is not in it. */
export async function inclusionByHash(
  ctx: ReceiptsContext,
  leafHex: string,
  size: number,
): Promise<{ leaf_index: number; tree_size: number; inclusion_proof: string[] } | undefined> {
  const leaf = await repo.leafByHash(ctx.core.store, leafHex);
  if (leaf === undefined || leaf.idx >= size) return undefined;
  return { leaf_index: leaf.idx, tree_size: size, inclusion_proof: await rangesHashes(ctx, inclusionRanges(leaf.idx, size)) };
}

/** Leaves in index order (for monitors: a run id twice means two journals were shown for it). */
export function entries(ctx: ReceiptsContext, offset: number, limit: number): Promise<repo.LeafRow[]> {
  return repo.leaves(ctx.core.store, offset, limit);
}
