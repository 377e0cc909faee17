/** The receipts module's instance: the core, the APIs it reads runs, crews and keys from, its sequencer's state. */
import type { CellCore } from '../context.ts';
import type { Iam } from '../iam/api.ts';
import type { Runs } from '../runs/api.ts';
import type { Teams } from '../teams/api.ts';

export interface ReceiptsContext {
  core: CellCore;
  iam: Iam;
  runs: Runs;
  teams: Teams;
  /** The sequencing under way in this process (one at a time; log.ts integrate). */
  integrating: Promise<number> | null;
  /** Set when more heads were queued while a sequencing ran. */
  again: boolean;
  /** The sequencing due after run ends queued heads (log.ts scheduleSoon), if one is. */
  soon: ReturnType<typeof setTimeout> | null;
}
