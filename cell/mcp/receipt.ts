/**
 * The receipt the cell answers an MCP result with (core/mcp-receipts/format.ts):
 * signed with this cell's identity key (the key of its journals, published at
 * /.well-known/cell-keys.json) over the run's id and graph, its journal's
 * head when the answer is given, its state and the hash of the output the
 * answer carries.
 */
import type { JournalRecord } from '../../core/journal/record.ts';
import { recordHash } from '../../core/journal/hash.ts';
import type { Receipt } from '../../core/mcp-receipts/format.ts';
import { outputHash } from '../../core/mcp-receipts/format.ts';
import { signReceipt } from '../../core/mcp-receipts/sign.ts';
import type { Run } from '../runs/api.ts';
import type { McpContext } from './context.ts';

/** A receipt for `run` at its journal's `head`, over `output` (what the answer carries); null before the first record. */
export async function receiptFor(ctx: McpContext, run: Run, head: JournalRecord | undefined, output: unknown): Promise<Receipt | null> {
  const h = head ?? (await ctx.runs.journalHead(run.run_id));
  if (h === undefined) return null;
  return signReceipt(
    {
      run_id: run.run_id,
      graph_hash: h.graph_hash,
      journal_seq: h.seq,
      journal_head: recordHash(h),
      state: run.state,
      output_hash: outputHash(output),
      issuer: ctx.core.config.cellId,
      issued_at: ctx.core.clock.now(),
    },
    ctx.iam.signer(),
  );
}
