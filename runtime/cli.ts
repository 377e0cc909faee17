/**
 * The command-line shape both programs share (`node dist/cell.mjs <command>`,
 * `dist/edge <command>`): a command table, `--help`, and one way of turning a
 * failure into a message and an exit code. ServiceErrors print their code and
 * reason (exit 1); set-up errors and anything else print their message (exit 2).
 */
import { isServiceError } from '../core/errors.ts';
import { SetupError } from './setup-error.ts';

export type Command = (argv: string[]) => Promise<void>;

/** Prints `error: msg` and exits. */
export function fail(msg: string, code = 2): never {
  process.stderr.write(`error: ${msg}\n`);
  process.exit(code);
}

/** Runs the command named by argv[0] from `commands`, or prints `help`. */
export async function dispatch(argv: string[], commands: Readonly<Record<string, Command>>, help: string): Promise<void> {
  const [cmd, ...rest] = argv;
  if (!cmd || cmd === 'help' || cmd === '--help' || cmd === '-h') {
    process.stdout.write(help);
    return;
  }
  const run = commands[cmd];
  if (!run) fail(`unknown command '${cmd}'; see --help`);
  try {
    await run(rest);
  } catch (err) {
    if (isServiceError(err)) fail(`${err.code}: ${err.message}${err.details?.['reason'] ? ` (${String(err.details['reason'])})` : ''}`, 1);
    if (err instanceof SetupError) fail(err.message);
    fail(err instanceof Error ? err.message : String(err));
  }
}
