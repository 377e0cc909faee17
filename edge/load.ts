/**
 * Loading hand-carried artifacts at the edge: read the file (at most `--max-bundle-bytes`, its header
 * judged before the rest is read: runtime/read-artifact.ts), verify it against the pinned trust
 * (bundles/), apply the device's acceptance rules, persist what was seen. Anything wrong refuses the
 * artifact (fail closed).
 */
import { nativeSha256Hex } from '../runtime/native-hash.ts';
import { acceptArtifact, type DeviceState } from '../bundles/accept.ts';
import { openKeyBundle } from '../bundles/key-bundle.ts';
import { openCrewBundle, type CrewBundle, type CrewContent } from '../bundles/crew-bundle.ts';
import { compileFormation } from '../core/compiler/compile.ts';
import type { BilletInput, FormationInput, SeatBinding } from '../core/compiler/types.ts';
import { contentHash } from '../core/canonical.ts';
import type { OpenedEnvelope } from '../bundles/envelope.ts';
import type { LoadedKeys } from './decide.ts';
import type { TrustFile } from './files.ts';
import { MAX_BUNDLE_BYTES, readSignedArtifact } from '../runtime/read-artifact.ts';

export async function loadKeyBundle(
  path: string,
  trust: TrustFile,
  state: DeviceState,
  now: number,
  maxBytes = MAX_BUNDLE_BYTES,
): Promise<{ keys: LoadedKeys; state: DeviceState }> {
  const text = readSignedArtifact(path, 'key bundle', trust.keys, maxBytes);
  const { opened, index } = await openKeyBundle(text, trust.keys, nativeSha256Hex);
  const next = acceptArtifact(state, opened, { now, issuer: trust.cell_id });
  return { keys: { index, version: opened.payload.version, expires_at: opened.payload.expires_at, hash: opened.hash }, state: next };
}

/** Recompiles the carried compiler input with core's compiler: it must give exactly the carried graph and hash. */
export function graphMatches(crew: CrewContent): boolean {
  const ci = crew.compiler_input as {
    formation: FormationInput;
    billets: BilletInput[];
    bindings: Record<string, SeatBinding> | null;
    tool_pins?: Record<string, string>;
  };
  try {
    const r = compileFormation(ci.formation, ci.billets, ci.bindings ?? undefined, ci.tool_pins ? { toolPins: ci.tool_pins } : {});
    return r.ok && r.graphHash === crew.graph_hash && contentHash(r.graph) === contentHash(crew.graph);
  } catch {
    return false; // malformed input cannot reproduce the graph
  }
}

export async function loadCrewBundle(
  path: string,
  trust: TrustFile,
  state: DeviceState,
  now: number,
  maxBytes = MAX_BUNDLE_BYTES,
): Promise<{ crew: OpenedEnvelope<CrewBundle>; state: DeviceState }> {
  const text = readSignedArtifact(path, 'crew bundle', trust.keys, maxBytes);
  const crew = await openCrewBundle(text, trust.keys, graphMatches);
  const next = acceptArtifact(state, crew, { now, issuer: trust.cell_id });
  return { crew, state: next };
}
