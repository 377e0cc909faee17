/**
 * Budgets a device holds (docs/edge.md "Budgets a device holds"). A crew bundle hands a device part of
 * each agent's ledger; the device spends it offline, so the cell must not spend it too. A hold per
 * (device, agent) records what was handed out (`allotted`), what the device's journals were charged
 * (`charged`) and what an operator gave back (`released`); the outstanding hold (allotted − charged −
 * released, never below 0) sits in the ledger's `held` column, which every reservation and every view
 * of the ledger subtracts from what is left. Every function writes in the caller's transaction: the
 * edge module issues a bundle, stores a journal or releases holds in one transaction with it, so a
 * failed write holds, charges or releases nothing.
 */
import { conflict, forbidden, invalid } from '../../../core/errors.ts';
import { isoTime } from '../../../core/iso-time.ts';
import type { Reader, Tx } from '../../store/types.ts';
import * as repo from './repository.ts';
import type { LedgerHold } from './repository.ts';

export type { LedgerHold };

/** What a hold still keeps out of its ledger: allotted − charged − released, never below 0. */
export const outstanding = (h: Pick<LedgerHold, 'allotted' | 'charged' | 'released'>): number =>
  Math.max(0, h.allotted - h.charged - h.released);

/** What a device may spend of an agent in all, across its bundles: what it was handed less what was released. */
export const ceilingOf = (h: Pick<LedgerHold, 'allotted' | 'released'>): number => Math.max(0, h.allotted - h.released);

/** What issuing a crew bundle held of one agent: the tokens taken from its ledger now, and the device's ceiling after. */
export interface HeldGrant {
  granted: number;
  ceiling: number;
}

/**
 * Holds, for a crew bundle to `deviceId` that lives until `until`, a share of each agent's ledger: `shares[agent]`,
 * or by default everything the ledger has left. Agents without a ledger get nothing (the bundle carries no budget
 * for them). A share naming an agent not among `agentIds` or without a ledger: 400 `share_agent_unbudgeted`; a share
 * larger than what is left: 409 `share_exceeds_budget` (the caller's transaction then holds nothing). Returns, by
 * agent with a ledger, what was granted and the ceiling the bundle carries (the device's cumulative allowance).
 */
export async function holdForDevice(
  tx: Tx,
  deviceId: string,
  agentIds: readonly string[],
  shares: Readonly<Record<string, number>> | undefined,
  until: number,
  at: number,
): Promise<Record<string, HeldGrant>> {
  const agents = [...new Set(agentIds)].sort();
  for (const a of Object.keys(shares ?? {})) {
    if (!agents.includes(a))
      throw invalid(`budgets names ${a}, which is not an agent of the crew`, { reason: 'share_agent_unbudgeted', agent_id: a });
  }
  const out: Record<string, HeldGrant> = {};
  const before = new Map((await repo.holdsOfDevice(tx, deviceId)).map((h) => [h.agent_id, h]));
  for (const a of agents) {
    const share = shares?.[a];
    const l = await repo.ledgerOf(tx, a);
    if (!l) {
      if (share !== undefined)
        throw invalid(`budgets names ${a}, which has no budget ledger`, { reason: 'share_agent_unbudgeted', agent_id: a });
      continue;
    }
    const left = Math.max(0, Math.floor(l.budget_limit - l.reserved - l.held - l.spent));
    const grant = share ?? left;
    const refuse = () =>
      conflict(`the share asked for ${a} is more than its ledger has left`, {
        reason: 'share_exceeds_budget',
        agent_id: a,
        requested: grant,
        left,
      });
    if (grant > left) throw refuse();
    // The ledger holds what the device may still spend: the outstanding hold. After a journal charged beyond
    // a released hold, part of the grant covers what was spent already (charged to spent then), so the ledger's
    // `held` grows by what the outstanding hold grows, and stays the sum of the outstanding holds.
    const h0 = before.get(a) ?? { allotted: 0, charged: 0, released: 0 };
    const grows = outstanding({ ...h0, allotted: h0.allotted + grant }) - outstanding(h0);
    if (grant > 0 && !(await repo.holdOnLedger(tx, a, grows, grant))) throw refuse();
    await repo.addToHold(tx, deviceId, a, grant, until, at);
    out[a] = { granted: grant, ceiling: ceilingOf({ allotted: h0.allotted + grant, released: h0.released }) };
  }
  return out;
}

/** What the device was handed of an agent's budget in all. */
export interface Allotment {
  agent_id: string;
  usage: number;
  allotted: number;
  charged: number;
}

/**
 * The first agent (in id order) the device holds budget of whose `usage` would take what the device was
 * charged past what it was ever handed (its hold's `allotted`), or null. A device cannot spend more than
 * its bundles' ceilings, which never pass what was handed, so a journal that says so is not believed.
 * An agent the device holds nothing of is not judged here: it is charged nothing (chargeDevice).
 */
export function beyondAllotment(holds: readonly LedgerHold[], usage: Readonly<Record<string, number>>): Allotment | null {
  for (const h of holds) {
    const tokens = usage[h.agent_id] ?? 0;
    if (tokens > 0 && h.charged + tokens > h.allotted)
      return { agent_id: h.agent_id, usage: tokens, allotted: h.allotted, charged: h.charged };
  }
  return null;
}

/**
 * Charges a device's journal: `usage` tokens by agent go to each ledger's spent, and out of the device's
 * outstanding hold as far as it reaches (the rest was spent beyond it: only after a release; the ledger
 * may then pass its limit). Only agents the device holds budget of are charged (it was handed nothing of
 * the others, so nothing of theirs is its to spend), and usage beyond what it was ever handed
 * (beyondAllotment) is refused, 403 `usage_beyond_allotment`: the caller's transaction then charges
 * nothing. Agents without a ledger are charged nothing. Returns what was charged, by agent.
 */
export async function chargeDevice(
  tx: Tx,
  deviceId: string,
  usage: Readonly<Record<string, number>>,
  at: number,
): Promise<Record<string, number>> {
  const rows = await repo.holdsOfDevice(tx, deviceId);
  const over = beyondAllotment(rows, usage);
  if (over !== null)
    throw forbidden(`the journal records more spending for ${over.agent_id} than the device was handed`, {
      reason: 'usage_beyond_allotment',
      ...over,
    });
  const holds = new Map(rows.map((h) => [h.agent_id, h]));
  const out: Record<string, number> = {};
  for (const [a, tokens] of Object.entries(usage).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))) {
    const h = holds.get(a);
    if (h === undefined || !(tokens > 0) || !(await repo.ledgerOf(tx, a))) continue;
    await repo.setHold(tx, { ...h, charged: h.charged + tokens, updated_at: at });
    await repo.settleOnLedger(tx, a, Math.min(tokens, outstanding(h)), tokens);
    out[a] = tokens;
  }
  return out;
}

/**
 * Gives a device's outstanding holds back to their ledgers, once every crew bundle that made them has expired
 * (409 `bundle_live` with `details.until` while one lives: the device may spend until then, and nothing the cell
 * does reaches it). Returns the device's holds after, and the tokens this release gave back by agent.
 */
export async function releaseDevice(
  tx: Tx,
  deviceId: string,
  at: number,
): Promise<{ holds: LedgerHold[]; released: Record<string, number> }> {
  const holds = await repo.holdsOfDevice(tx, deviceId);
  const until = Math.max(0, ...holds.map((h) => h.until_at));
  if (holds.length > 0 && at < until)
    throw conflict('a crew bundle issued to the device has not expired: it may still spend what it holds', {
      reason: 'bundle_live',
      device_id: deviceId,
      until: isoTime(until),
    });
  const out: LedgerHold[] = [];
  const released: Record<string, number> = {};
  for (const h of holds) {
    const back = outstanding(h);
    if (back === 0) {
      out.push(h);
      continue;
    }
    const next = { ...h, released: h.released + back, updated_at: at };
    await repo.setHold(tx, next);
    await repo.settleOnLedger(tx, h.agent_id, back, 0);
    released[h.agent_id] = back;
    out.push(next);
  }
  return { holds: out, released };
}

/** A device's holds, by agent id. */
export function deviceHolds(db: Reader, deviceId: string): Promise<LedgerHold[]> {
  return repo.holdsOfDevice(db, deviceId);
}
