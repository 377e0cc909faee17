/**
 * The device's tool catalog: the built-in tools a device can run offline
 * (`calc`, `clock.now`, `kv.get`, `kv.put`, `http.get`, `http.request`), with
 * the same definitions and the same floor as the cell's
 * (core/catalog/builtin.ts, runtime/http-call.ts, runtime/http-request.ts),
 * judged from what the
 * crew bundle carries: each seat's authority in the graph (allowed_tools,
 * data grants, egress allowlist, clearance, compartments) and the governing
 * contracts (the engine's value gate, through the contracts port).
 *
 * The HTTP tools reach only what the seat's egress allowlist names, with the
 * method it names (core/authority/egress.ts), and never a loopback, private or
 * link-local address unless `edge serve --egress-allow-private` names its
 * range (runtime/ssrf.ts: judged at connect time, as at the cell); a write
 * method carries the call's effect key as `Idempotency-Key`. A device has no
 * OAuth server: its requests carry no delegated token.
 *
 * Workspace storage is the device's own file `kv.json` in its data
 * directory, for the crew bundle's `workspace_id`; it is written whole and
 * durably on each `kv.put` (read, checked and written in one synchronous step,
 * so two calls cannot interleave).
 *
 * The imported (MCP) tools the crew bundle carries, on the stdio servers the
 * device configures, are edge/mcp-tools.ts: the port hands them their calls.
 *
 * `unhonouredTools` says which tools of a crew the device cannot honour
 * (a tool outside this catalog, kv without a workspace in the bundle): the
 * edge refuses such a crew's runs before they start, naming them. A call that
 * waits for a human approval (`ask`, or `auto-read` for a write) waits on the
 * device's approvals port (edge/approvals.ts), as at the cell.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BUILTIN_TOOLS, toolAuthorityOf, toolFailureAnswer, type KvEntry, type KvStorage } from '../core/catalog/builtin.ts';
import { EngineRefusal } from '../core/engine/refusal.ts';
import type { Graph, GraphNode, LeafSpec, SkillSpec, ToolsPort } from '../core/engine/types.ts';
import { HTTP_GET, type HttpTool, type HttpToolsContext } from '../runtime/http-call.ts';
import { HTTP_REQUEST } from '../runtime/http-request.ts';
import { guardedDispatcher } from '../runtime/ssrf.ts';
import { stepDeadline } from '../runtime/step-deadline.ts';
import { deviceSeal, sealedByDevice, writeFileDurable, type DeviceFile } from './files.ts';
import type { DeviceMcpTools } from './mcp-tools.ts';

export const KV_FILE = 'kv.json';

/** What the kv file's seal covers before its entries (the device key signs its state, journals and exports too). */
const KV_DOMAIN = 'agent-cell/device-kv/2\n';

interface StoredEntry extends KvEntry {
  at: number;
  by: string;
}
/** Entries by workspace id, then key. */
type KvWorkspaces = Record<string, Record<string, StoredEntry>>;
/** The kv file: its entries sealed with the device key, over the device id and the entries. */
interface KvFile {
  format_version: 2;
  device_id: string;
  workspaces: KvWorkspaces;
  sig: string;
}

/** The device's kv file is not one this device sealed: every kv call fails until it is (what to do is in the message). */
export class KvNotSealed extends Error {
  override name = 'KvNotSealed';
}

const sealedBody = (deviceId: string, workspaces: KvWorkspaces) => ({ device_id: deviceId, workspaces });

/**
 * The entries of the device's kv file, or none when there is no file. A file this device did not seal
 * (written by hand, edited, another device's, or by a release before the seal) is not believed: an
 * entry's classification or compartments lowered by hand would hand it to a seat that may not read it.
 */
export function readKv(dir: string, device: DeviceFile): KvWorkspaces {
  const path = join(dir, KV_FILE);
  if (!existsSync(path)) return {};
  let f: Omit<Partial<KvFile>, 'format_version'> & { format_version?: unknown };
  try {
    f = JSON.parse(readFileSync(path, 'utf8')) as typeof f;
  } catch {
    throw new KvNotSealed(`${path} is not JSON: the device's kv entries cannot be read`);
  }
  if (f?.format_version === 1)
    throw new KvNotSealed(
      `${path} was written by an older release of the edge and is not sealed: seal it as it is with \`edge state adopt --data DIR\``,
    );
  if (
    f?.format_version !== 2 ||
    f.device_id !== device.device_id ||
    typeof f.workspaces !== 'object' ||
    f.workspaces === null ||
    !sealedByDevice(KV_DOMAIN, sealedBody(f.device_id, f.workspaces), f.sig, device)
  )
    throw new KvNotSealed(
      `${path} is not sealed by this device's key: it was changed or replaced. Restore it from a backup, or move it away ` +
        '(its entries are then gone).',
    );
  return f.workspaces;
}

/** Writes the kv file whole, sealed, durably (mode 0600). */
function writeKv(dir: string, device: DeviceFile, workspaces: KvWorkspaces): void {
  const file: KvFile = {
    format_version: 2,
    device_id: device.device_id,
    workspaces,
    sig: deviceSeal(KV_DOMAIN, sealedBody(device.device_id, workspaces), device),
  };
  writeFileDurable(join(dir, KV_FILE), JSON.stringify(file), 0o600);
}

/**
 * `edge state adopt`: seals, as it is, a kv file an older release wrote (format 1). Returns how many
 * entries it holds, or null when there is nothing to adopt (no file, or one sealed already).
 */
export function adoptKv(dir: string, device: DeviceFile): number | null {
  const path = join(dir, KV_FILE);
  if (!existsSync(path)) return null;
  const f = JSON.parse(readFileSync(path, 'utf8')) as { format_version?: unknown; workspaces?: unknown };
  if (f?.format_version !== 1) return null;
  if (typeof f.workspaces !== 'object' || f.workspaces === null) throw new Error(`${path} is not a device kv file of format 1`);
  const ws = f.workspaces as KvWorkspaces;
  writeKv(dir, device, ws);
  return Object.values(ws).reduce((n, w) => n + Object.keys(w).length, 0);
}

/** The device's HTTP tools (the cell's definitions and floor). */
const HTTP_TOOLS: ReadonlyMap<string, HttpTool> = new Map([HTTP_GET, HTTP_REQUEST].map((t) => [t.name, t]));

/** The names of every tool a device runs, sorted. */
const DEVICE_TOOL_NAMES = [...BUILTIN_TOOLS.keys(), ...HTTP_TOOLS.keys()].sort();

/** The device's workspace storage (its data directory's kv.json, sealed with the device key). */
export function deviceKv(dir: string, device: DeviceFile): KvStorage {
  return {
    async read(ws, key) {
      const f = readKv(dir, device);
      const e = Object.hasOwn(f, ws) ? f[ws]! : {};
      if (!Object.hasOwn(e, key)) return undefined;
      const x = e[key]!;
      return { value: x.value, classification: x.classification, compartments: x.compartments };
    },
    async write(ws, key, check, entry) {
      const f = readKv(dir, device);
      const w = Object.hasOwn(f, ws) ? f[ws]! : {};
      check(Object.hasOwn(w, key) ? w[key]!.compartments : undefined);
      w[key] = { ...entry, value: JSON.parse(entry.value) as unknown };
      f[ws] = w;
      writeKv(dir, device, f);
    },
  };
}

/**
 * The engine's tools port on a device: the built-in tools on the device's clock and storage, the HTTP tools
 * through a dispatcher whose connections pass the floor (`allowPrivate`: `--egress-allow-private`). A refusal
 * of the floor is the engine's refusal (as at the cell, crew-runs/ports.ts); bad arguments go back to the
 * model. An HTTP call stops at its step's `timeout_ms` (its request is aborted) and fails `step_timeout`.
 * `imported`: the crew bundle's MCP tools on the device's stdio servers (edge/mcp-tools.ts).
 */
export function deviceToolsPort(
  dir: string,
  device: DeviceFile,
  clock: { now(): number },
  workspaceId: string | null,
  allowPrivate: readonly string[] = [],
  imported?: DeviceMcpTools,
): ToolsPort & { close(): Promise<void> } {
  const kv = deviceKv(dir, device);
  let http: HttpToolsContext | null = null;
  // One pool of guarded connections for the device, made when a crew first calls an HTTP tool.
  const httpContext = () => (http ??= { allowPrivate, dispatcher: guardedDispatcher(allowPrivate) });
  return {
    /** Closes the HTTP tools' connections (edge serve's stop), if a crew ever called one. */
    async close() {
      const h = http;
      http = null;
      await h?.dispatcher.close();
    },
    describe(name) {
      const t = BUILTIN_TOOLS.get(name) ?? HTTP_TOOLS.get(name);
      if (t === undefined) return imported?.describe(name);
      const { run: _run, ...descriptor } = t;
      return descriptor;
    },
    async call(name, args, call) {
      const caller = {
        workspaceId: workspaceId ?? '',
        agentId: call.agent_id ?? 'none',
        authority: toolAuthorityOf(call.authority),
        ...(call.effect_key !== undefined ? { effectKey: call.effect_key } : {}),
      };
      if (imported?.describe(name) !== undefined) return imported.call(name, args, call);
      const h = HTTP_TOOLS.get(name);
      if (h !== undefined) {
        const deadline = stepDeadline(call.timeout_ms);
        try {
          return await deadline.race(h.run(httpContext(), caller, args, deadline.signal));
        } catch (e) {
          return toolFailureAnswer(e);
        }
      }
      const t = BUILTIN_TOOLS.get(name);
      if (t === undefined) throw new EngineRefusal('tool_unknown', `no tool ${name} on this device`, { tool: name });
      if (workspaceId === null && name.startsWith('kv.'))
        throw new EngineRefusal('tool_unknown', `the crew bundle names no workspace for ${name}`, { tool: name });
      try {
        return await t.run({ clock, kv }, caller, args);
      } catch (e) {
        return toolFailureAnswer(e);
      }
    },
  };
}

/** A tool of the crew the device cannot honour, and why. */
export interface UnhonouredTool {
  tool: string;
  seat: string | null;
  why: string;
}

/** The tools a skill calls (a tool skill, the steps of a chain). */
function skillTools(spec: SkillSpec | undefined, depth = 0): string[] {
  if (spec === undefined || depth > 16) return [];
  const d = spec.definition ?? {};
  if (spec.skill_kind === 'tool' && typeof d['tool'] === 'string') return [d['tool']];
  const steps = d['steps'];
  return Array.isArray(steps) ? steps.flatMap((x) => skillTools(x as unknown as SkillSpec, depth + 1)) : [];
}

/** The tools a step calls by itself (a tool step, a tool skill, the body of a map or a loop). */
function nodeTools(n: GraphNode | LeafSpec): string[] {
  const c = n.config as unknown as Record<string, unknown>;
  if (n.kind === 'tool') return typeof c['tool'] === 'string' ? [c['tool']] : [];
  if (n.kind === 'skill') return skillTools(c['skill'] as SkillSpec | undefined);
  const body = c['body'];
  return typeof body === 'object' && body !== null && 'kind' in body ? nodeTools(body as LeafSpec) : [];
}

/**
 * The tools of a crew's graph the device cannot honour (by seat, then tool), empty when it can run every
 * one: each seat's granted tools and every tool a step calls must be in the device's catalog; kv needs the
 * bundle's workspace. (A call that waits for a human approval is honoured: it waits on the device.)
 * `imported` describes the crew bundle's MCP tools (whether their servers honour their pins is
 * edge/mcp-tools.ts's question, asked before each run).
 */
export function unhonouredTools(graph: Graph, workspaceId: string | null, imported?: Pick<DeviceMcpTools, 'describe'>): UnhonouredTool[] {
  const used = new Map<string, { tool: string; seat: string | null }>();
  const use = (tool: string, seat: string | null) => used.set(`${seat ?? ''}\u0000${tool}`, { tool, seat });
  for (const [id, s] of Object.entries(graph.seats)) for (const tool of s.authority.allowed_tools) use(tool, id);
  for (const n of graph.nodes) for (const tool of nodeTools(n)) use(tool, 'seat' in n && typeof n.seat === 'string' ? n.seat : null);
  const out: UnhonouredTool[] = [];
  for (const [, { tool, seat }] of [...used].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const t = BUILTIN_TOOLS.get(tool) ?? HTTP_TOOLS.get(tool) ?? imported?.describe(tool);
    const why =
      t === undefined
        ? `not in the device catalog (${DEVICE_TOOL_NAMES.join(', ')})`
        : workspaceId === null && tool.startsWith('kv.')
          ? 'the crew bundle names no workspace'
          : null;
    if (why !== null) out.push({ tool, seat, why });
  }
  return out;
}
