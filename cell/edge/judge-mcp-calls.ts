/**
 * Re-judging a device journal's MCP tool calls at import (journal-import.ts):
 * a device calls an imported tool only under the pin its crew bundle carried
 * (the graph's `tool_pins`, which the graph hash covers; edge/mcp-tools.ts),
 * and its journal's step records name that pin (`data.pin`). So every `step`
 * record of a call of `mcp.…` must name a tool the bundle carried, under the
 * bundle's pin; else the journal is refused, 403 `journal_tool_unpinned`,
 * naming the record (its seq and step id), the tool, and the pins.
 */
import type { Reason } from '../../core/reasons.ts';
import type { Graph } from '../../core/engine/types.ts';
import type { JournalRecord } from '../../core/journal/record.ts';

type Refuse = (reason: Reason, message: string, code: 'forbidden', extra?: Record<string, unknown>) => Promise<never>;

/** Refuses (through `refuse`) the first MCP call of `records` the bundle of `graph` did not pin (see the header). */
export async function judgeMcpCalls(
  runId: string,
  records: readonly JournalRecord[],
  graph: () => Promise<Graph | undefined>,
  refuse: Refuse,
): Promise<void> {
  let pins: Readonly<Record<string, string>> | undefined;
  for (const r of records) {
    const tool = r.kind === 'step' ? r.data?.['tool'] : undefined;
    if (typeof tool !== 'string' || !tool.startsWith('mcp.')) continue;
    // A journal that calls no MCP tool needs no graph; one that does is judged on the graph its bundle carried.
    pins ??= (await graph())?.tool_pins ?? {};
    const carried = Object.hasOwn(pins, tool) ? pins[tool]! : null;
    const pin = typeof r.data?.['pin'] === 'string' ? (r.data['pin'] as string) : null;
    if (carried !== null && pin === carried) continue;
    const at = { run_id: runId, seq: r.seq, step_id: r.step_id, tool, pin, carried };
    await refuse(
      'journal_tool_unpinned',
      carried === null
        ? `record ${r.seq} (${r.step_id}) calls ${tool}, which the crew bundle did not carry`
        : `record ${r.seq} (${r.step_id}) calls ${tool} under ${pin ?? 'no pin'}, not the crew bundle's pin ${carried}`,
      'forbidden',
      at,
    );
  }
}
