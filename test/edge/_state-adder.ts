// A process that adds to an agent's spending on a device, as `edge serve` does with each model call's commit
// (edge/files.ts updateState): argv: data dir, agent id, times. For test/edge/state.test.ts's two writers at once.
import { readDevice, updateState } from '../../edge/files.ts';

const [dir, agent, times] = process.argv.slice(2) as [string, string, string];
const device = readDevice(dir);
for (let i = 0; i < Number(times); i++) {
  updateState(dir, device, (s) => ({ ...s!, spent: { ...s!.spent, [agent]: (s!.spent?.[agent] ?? 0) + 1 } }));
}
