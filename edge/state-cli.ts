/**
 * `edge state adopt --data DIR`: seals, as it is, a state.json written by an older release of the edge
 * (format 1, unsigned), which this release refuses to start with (edge/files.ts `readState`). Run it
 * once after upgrading a device, on the state file that device wrote: what it says the device has seen
 * (the highest bundle versions, the clock high-water mark) is believed from then on, so it is printed.
 * The kv entries an older release wrote (kv.json, format 1: edge/tools.ts) are sealed the same way.
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parseDeviceState } from '../bundles/accept.ts';
import { isoTime } from '../core/iso-time.ts';
import { paths, readDevice, writeState } from './files.ts';
import { adoptKv } from './tools.ts';
import { Refusal, UsageError, type CommandHelp } from '../runtime/cli.ts';

/** The help of `state adopt` (edge/main.ts's command table). */
export const STATE_HELP: Record<'adopt', CommandHelp> = {
  adopt: {
    summary: 'seal, as they are, the state.json and kv.json an older release of the edge wrote (this release refuses unsealed ones)',
    usage: '--data DIR',
  },
};

/** `state adopt`: argv[0] is the subcommand (the dispatcher checked it), the rest its options. */
export async function stateCommand(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (sub !== 'adopt') throw new UsageError('state takes adopt');
  const { values } = parseArgs({ args: rest, options: { data: { type: 'string' } }, strict: true });
  if (!values.data) throw new UsageError('state adopt needs --data DIR');
  const dir = resolve(values.data);
  const device = readDevice(dir);
  const p = paths(dir).state;
  if (!existsSync(p)) throw new Error(`${p} is missing: there is no state to adopt`);
  let raw: { format_version?: unknown };
  try {
    raw = JSON.parse(readFileSync(p, 'utf8')) as typeof raw;
  } catch {
    throw new Error(`${p} is not JSON: there is no state to adopt`);
  }
  const stateSealed = raw?.format_version === 2;
  if (!stateSealed) {
    const state = parseDeviceState(raw);
    if (state.device_id !== device.device_id) throw new Refusal(`${p} is the state of device ${state.device_id}, not of this device`);
    writeState(dir, state, device, { replace: true });
    const seen = Object.entries(state.seen).map(([k, v]) => `${k} v${v.version}`);
    process.stdout.write(
      `sealed the state of ${device.device_id}: ${seen.length ? seen.join(', ') : 'no bundle seen'}; clock high-water ${
        state.clock_high_water ? isoTime(state.clock_high_water) : 'none'
      }\n`,
    );
  }
  // The device's kv entries an older release wrote (kv.json, format 1), sealed as they are.
  const kv = adoptKv(dir, device);
  if (kv !== null) process.stdout.write(`sealed the kv entries of ${device.device_id}: ${kv} entr${kv === 1 ? 'y' : 'ies'}\n`);
  if (stateSealed && kv === null) throw new Refusal(`${p} is already sealed by this release: nothing to adopt`);
}
