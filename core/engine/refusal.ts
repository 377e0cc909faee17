/**
 * EngineRefusal: how a port (model, tools) refuses a call for a policy reason
 * (egress_denied, clearance, posture_forbidden...). The engine turns it into a
 * `refused` run with a `refusal` journal record naming the reason. Recognized by
 * its name, not by instanceof, so it works across bundles.
 */
import type { JsonObject } from '../journal/record.ts';
import type { WireReason } from '../reasons.ts';

export class EngineRefusal extends Error {
  readonly reason: WireReason;
  readonly details: JsonObject;
  constructor(reason: WireReason, message: string, details: JsonObject = {}) {
    super(message);
    this.name = 'EngineRefusal';
    this.reason = reason;
    this.details = details;
  }
}

/** True for an EngineRefusal (by name and shape). */
export function isEngineRefusal(e: unknown): e is EngineRefusal {
  return (
    typeof e === 'object' &&
    e !== null &&
    (e as { name?: unknown }).name === 'EngineRefusal' &&
    typeof (e as { reason?: unknown }).reason === 'string'
  );
}
