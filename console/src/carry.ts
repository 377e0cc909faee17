/**
 * Journals you can carry: a run's journal exported as one file with the
 * public keys that signed it, and the offline check of any exported journal
 * in this browser (nothing is uploaded): the console's own export, the API's
 * journal answer (`{ records }`), or an edge device's signed journal export
 * (bundles/journal-export.ts: an `agent-cell-signed/1` envelope whose payload
 * holds the records, signed by the device key). The records are checked with
 * the same verifier as everywhere (core/journal/verify.ts); an edge envelope's
 * signature is checked too.
 *
 * Which keys: those the file carries, those of dropped key files (a cell's
 * `cell-keys.json`, a device's trust anchor or public key), this cell's
 * published keys, and the edge devices registered here. A key the file
 * carries proves the journal is intact, not who wrote it: the verdict says
 * for every signer whether this cell vouches for it.
 */
import { fromB64url, utf8 } from '../../core/canonical.ts';
import { verifyEd25519 } from '../../core/crypto/ed25519.ts';
import type { JournalRecord } from '../../core/journal/record.ts';
import type { ParentJournal } from '../../core/journal/lineage.ts';
import { verifyJournal, type JournalVerdict } from '../../core/journal/verify.ts';

export const EXPORT_FORMAT = 'agent-cell-journal-export/1';

export interface CarriedKey {
  kid: string;
  jwk: JsonWebKey;
}

/** The console's export file. */
export interface JournalFile {
  format: typeof EXPORT_FORMAT;
  run_id: string;
  cell_id: string;
  exported_at: string;
  records: unknown[];
  /** The public keys of every signer the records name (the parents' too), as the cell published them. */
  keys: CarriedKey[];
  /**
   * A fork's parent: its records from seq 1 through the fork point, and its own parent for a fork of a fork,
   * so an offline verifier checks the lineage (core/journal/lineage.ts). Absent for a run that was not forked.
   */
  parent?: CarriedParent;
}

/** A parent journal as an export carries it. */
export interface CarriedParent {
  run_id: string;
  records: unknown[];
  parent?: CarriedParent;
}

function signersOf(records: readonly unknown[], parent: CarriedParent | undefined): string[] {
  const out = new Set<string>();
  for (let rs: readonly unknown[] | undefined = records, p = parent; rs; rs = p?.records, p = p?.parent)
    for (const r of rs) {
      const k = (r as { signer_kid?: unknown }).signer_kid;
      if (typeof k === 'string') out.add(k);
    }
  return [...out];
}

export function buildExport(
  runId: string,
  cellId: string,
  records: readonly unknown[],
  published: ReadonlyMap<string, JsonWebKey>,
  parent?: CarriedParent,
): JournalFile {
  const kids = signersOf(records, parent);
  return {
    format: EXPORT_FORMAT,
    run_id: runId,
    cell_id: cellId,
    exported_at: new Date().toISOString(),
    records: [...records],
    keys: kids.filter((k) => published.has(k)).map((kid) => ({ kid, jwk: published.get(kid)! })),
    ...(parent ? { parent } : {}),
  };
}

/** A carried parent as the verifier takes it (at most 16 generations). */
function parentOf(v: unknown, depth = 0): ParentJournal | undefined {
  if (!isObj(v) || !Array.isArray(v['records']) || depth > 16) return undefined;
  const up = parentOf(v['parent'], depth + 1);
  return { records: v['records'] as JournalRecord[], ...(up ? { parent: up } : {}) };
}

export type Parsed =
  | {
      kind: 'journal';
      source: 'console' | 'api' | 'edge';
      name: string;
      run_id: string | null;
      records: unknown[];
      keys: CarriedKey[];
      envelope: EdgeEnvelope | null;
      /** A fork's parent journal, when the file carries it. */
      parent?: ParentJournal;
    }
  | { kind: 'keys'; name: string; keys: CarriedKey[] }
  | { kind: 'unknown'; name: string; problem: string };

interface EdgeEnvelope {
  kid: string;
  signature: string;
  payloadBytes: Uint8Array;
  issuer: string | null;
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function keysOf(v: unknown): CarriedKey[] {
  if (!Array.isArray(v)) return [];
  return v
    .filter((k): k is CarriedKey => isObj(k) && typeof k['kid'] === 'string' && isObj(k['jwk']))
    .map((k) => ({ kid: k.kid, jwk: k.jwk }));
}

/** What a dropped file is. */
export function parseFile(name: string, text: string): Parsed {
  const nl = text.indexOf('\n');
  if (nl > 0 && text.startsWith('{"')) {
    // A signed envelope: one header line, then the payload.
    let header: unknown;
    try {
      header = JSON.parse(text.slice(0, nl));
    } catch {
      header = null;
    }
    if (isObj(header) && typeof header['format'] === 'string' && header['format'].startsWith('agent-cell-signed/')) {
      let payload: unknown;
      try {
        payload = JSON.parse(text.slice(nl + 1));
      } catch {
        return { kind: 'unknown', name, problem: 'the signed payload is not JSON' };
      }
      if (!isObj(payload) || payload['type'] !== 'journal' || !Array.isArray(payload['records']))
        return {
          kind: 'unknown',
          name,
          problem: `a signed ${isObj(payload) ? String(payload['type']) : ''} artifact, not a journal export`,
        };
      const run = isObj(payload['run']) ? payload['run'] : {};
      return {
        kind: 'journal',
        source: 'edge',
        name,
        run_id: typeof run['run_id'] === 'string' ? run['run_id'] : null,
        records: payload['records'],
        keys: [],
        envelope: {
          kid: String(header['kid']),
          signature: String(header['signature']),
          payloadBytes: utf8(text.slice(nl + 1)),
          issuer: typeof payload['issuer'] === 'string' ? payload['issuer'] : null,
        },
      };
    }
  }
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return { kind: 'unknown', name, problem: 'not JSON, and not a signed journal export' };
  }
  if (!isObj(v)) return { kind: 'unknown', name, problem: 'not a journal or a key file' };
  if (Array.isArray(v['records'])) {
    return {
      kind: 'journal',
      source: v['format'] === EXPORT_FORMAT ? 'console' : 'api',
      name,
      run_id: typeof v['run_id'] === 'string' ? v['run_id'] : null,
      records: v['records'],
      keys: keysOf(v['keys']),
      envelope: null,
      ...(parentOf(v['parent']) ? { parent: parentOf(v['parent'])! } : {}),
    };
  }
  const keys = keysOf(v['keys']);
  if (keys.length) return { kind: 'keys', name, keys };
  // A device as the cell lists it, or a bare Ed25519 public JWK with a kid.
  if (typeof v['device_id'] === 'string' && isObj(v['public_jwk']))
    return { kind: 'keys', name, keys: [{ kid: v['device_id'], jwk: v['public_jwk'] }] };
  if (typeof v['kid'] === 'string' && v['kty'] === 'OKP') return { kind: 'keys', name, keys: [{ kid: v['kid'], jwk: v as JsonWebKey }] };
  return { kind: 'unknown', name, problem: 'not a journal or a key file' };
}

export type KeySource = 'this cell' | 'edge device registered here' | 'the file' | 'a dropped key file';

export interface SignerReport {
  kid: string;
  /** Where its key came from; null when no key is known (the verdict then fails at its first record). */
  source: KeySource | null;
}

export interface CarriedVerdict {
  verdict: JournalVerdict;
  count: number;
  signers: SignerReport[];
  /** An edge envelope's own signature: true, false, or null when there is no envelope (or no key for it). */
  envelope: boolean | null;
}

/**
 * Verifies a parsed journal: the records with core's verifier, with keys from
 * the sources in order of trust (this cell's, its registered devices', dropped
 * key files', the file's own); an edge envelope's signature with its key.
 */
export async function verifyCarried(
  j: Extract<Parsed, { kind: 'journal' }>,
  sources: { cell: ReadonlyMap<string, JsonWebKey>; devices: ReadonlyMap<string, JsonWebKey>; dropped: readonly CarriedKey[] },
): Promise<CarriedVerdict> {
  const lookup = (kid: string): { jwk: JsonWebKey; source: KeySource } | null => {
    const c = sources.cell.get(kid);
    if (c) return { jwk: c, source: 'this cell' };
    const d = sources.devices.get(kid);
    if (d) return { jwk: d, source: 'edge device registered here' };
    const k = sources.dropped.find((x) => x.kid === kid);
    if (k) return { jwk: k.jwk, source: 'a dropped key file' };
    const f = j.keys.find((x) => x.kid === kid);
    if (f) return { jwk: f.jwk, source: 'the file' };
    return null;
  };
  const kids = [
    ...new Set(j.records.map((r) => (r as { signer_kid?: unknown }).signer_kid).filter((k): k is string => typeof k === 'string')),
  ];
  const verdict = await verifyJournal(j.records as JournalRecord[], (kid) => lookup(kid)?.jwk, j.parent ? { parent: j.parent } : {});
  let envelope: boolean | null = null;
  if (j.envelope) {
    const key = lookup(j.envelope.kid);
    if (key) {
      let sig: Uint8Array | null = null;
      try {
        sig = fromB64url(j.envelope.signature);
      } catch {
        sig = null;
      }
      envelope = sig !== null && (await verifyEd25519(key.jwk, j.envelope.payloadBytes, sig));
    }
  }
  return { verdict, count: j.records.length, signers: kids.map((kid) => ({ kid, source: lookup(kid)?.source ?? null })), envelope };
}
