/**
 * Parses the Prometheus text exposition format with the Prometheus project's
 * own parser (prometheus_client.parser, Debian's python3-prometheus-client;
 * `make metrics-deps` installs it), so the cell's metrics are read by an
 * implementation that is not ours. Every sample comes back with its full
 * name (`_bucket`, `_count`, `_sum` included) and labels.
 */
import { spawnSync } from 'node:child_process';

export interface PromSample {
  family: string;
  type: string;
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Debian's interpreter: the one apt installs python3-prometheus-client for. */
const PYTHON = '/usr/bin/python3';

const SCRIPT = `
import json, math, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for f in text_string_to_metric_families(sys.stdin.read()):
    for s in f.samples:
        v = s.value
        out.append({"family": f.name, "type": f.type, "name": s.name, "labels": s.labels,
                    "value": v if math.isfinite(v) else str(v)})
json.dump(out, sys.stdout)
`;

export function parseExposition(text: string): PromSample[] {
  const r = spawnSync(PYTHON, ['-c', SCRIPT], { input: text, encoding: 'utf8', timeout: 20_000 });
  if (r.status !== 0) {
    throw new Error(`prometheus_client could not parse the exposition (missing? run 'make metrics-deps'):\n${r.stderr}`);
  }
  return (JSON.parse(r.stdout) as PromSample[]).map((s) => ({ ...s, value: Number(s.value) }));
}
