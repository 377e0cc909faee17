/**
 * The command-line shape both programs share (`node dist/cell.mjs <command>`,
 * `dist/edge <command>`): a table of commands, each with its usage line and
 * summary, from which `--help` (of the program, of every command and
 * subcommand) is printed; `--version`; and one way of turning a failure into
 * a message on stderr and an exit status (EXIT).
 */
import { isServiceError } from '../core/errors.ts';
import { SetupError } from './setup-error.ts';
import { PROGRAM_VERSION } from './version.ts';

/**
 * The exit statuses of both programs, documented in their `--help` and in docs/operations.md. A script
 * tells "fix the command line" from "the rules said no" from "fix the machine" without reading stderr.
 */
export const EXIT = {
  /** The command did what it was asked. */
  ok: 0,
  /** It could not start or finish: a port in use, a file or data directory it cannot use, a store it cannot reach. */
  failure: 1,
  /** The command line is wrong: an unknown command or option, a missing or malformed value. Nothing was done. */
  usage: 2,
  /** Understood and refused by the rules: a key or bundle that does not verify, work that would replace what exists. */
  refused: 3,
} as const;

export type ExitStatus = (typeof EXIT)[keyof typeof EXIT];

/** The lines every `--help` ends with. */
export const EXIT_HELP = `Exit status:
  0  done
  1  failed: could not start or finish (a port in use, a file, data directory or store it cannot
     use, a key file that does not fit); the message says what to fix
  2  usage: the command line is wrong (an unknown command or option, a missing or malformed value)
  3  refused: understood, and refused by the rules (a key or bundle that does not verify, a device
     the cell does not know, work that would replace what exists or act while a cell serves)
`;

export type Command = (argv: string[]) => Promise<void>;

/** What `--help` says of one command. */
export interface CommandHelp {
  /** One line: what the command does. */
  summary: string;
  /** What follows the command's name on its usage line, e.g. `--data DIR --out FILE`. */
  usage: string;
  /** Notes on the options, each line indented by four spaces. */
  details?: string;
}

/** A command that runs on its own: `cell backup …`. */
export interface LeafCommand extends CommandHelp {
  run: Command;
}

/** A command of subcommands (`cell bundle keys|trust`): `run` is given the subcommand's name first, then its options. */
export interface CommandGroup {
  summary: string;
  subcommands: Readonly<Record<string, CommandHelp>>;
  run: Command;
}

export type CommandEntry = LeafCommand | CommandGroup;

/** One program's command line: its name, how it is started, what it is for, its commands. */
export interface Program {
  /** `cell`, `edge`: the first word of `--version`. */
  name: string;
  /** How a user starts it, the start of every usage line: `node dist/cell.mjs`. */
  invocation: string;
  /** One line under the program's name in its help. */
  about: string;
  commands: Readonly<Record<string, CommandEntry>>;
  /** Printed after the commands in the program's help. */
  notes?: string;
}

/** A wrong command line: the command's usage line is printed with the message, exit status 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** A request the command understood and refuses (exit status 3): it would replace what exists, or act where it must not. */
export class Refusal extends Error {
  override name = 'Refusal';
}

/** Prints `error: msg` and exits with `code` (a usage error unless told otherwise). */
export function fail(msg: string, code: ExitStatus = EXIT.usage): never {
  process.stderr.write(`error: ${msg}\n`);
  process.exit(code);
}

/** `cell 0.1.0 (Node v24.22.3)`: the program's version from package.json and the Node it runs on (embedded, for dist/edge). */
export function versionLine(program: Pick<Program, 'name'>): string {
  return `${program.name} ${PROGRAM_VERSION} (Node ${process.version})\n`;
}

const HELP_FLAGS = new Set(['--help', '-h']);
const VERSION_FLAGS = new Set(['--version', '-V', 'version']);

/** Whether a command's arguments ask for its help (before a `--`, after which everything is an operand). */
function wantsHelp(args: readonly string[]): boolean {
  for (const a of args) {
    if (a === '--') return false;
    if (HELP_FLAGS.has(a)) return true;
  }
  return false;
}

function isGroup(e: CommandEntry): e is CommandGroup {
  return 'subcommands' in e;
}

/** The program's help: every command with its usage and notes, then the exit statuses. */
export function programHelp(program: Program): string {
  let text = `${program.name}: ${program.about}\n\nUsage: ${program.invocation} <command> [options]\n`;
  text += `       ${program.invocation} <command> --help     what one command takes\n`;
  text += `       ${program.invocation} --version\n\nCommands:\n`;
  for (const [name, e] of Object.entries(program.commands)) {
    const leaves: [string, CommandHelp][] = isGroup(e) ? Object.entries(e.subcommands).map(([s, h]) => [`${name} ${s}`, h]) : [[name, e]];
    for (const [path, h] of leaves) {
      text += `  ${path.padEnd(18)} ${h.summary}\n`;
      if (h.usage !== '[options]' && h.usage !== '') text += `    ${h.usage}\n`;
      if (h.details) text += h.details;
    }
  }
  text += `  ${'help'.padEnd(18)} this text (help COMMAND: that command's)\n`;
  text += `  ${'--version'.padEnd(18)} the program's version and the Node it runs on\n`;
  if (program.notes) text += `\n${program.notes}`;
  return `${text}\n${EXIT_HELP}`;
}

/** The usage line of one command or subcommand: `node dist/cell.mjs bundle keys --data DIR …`. */
function usageLine(program: Program, path: string, h: CommandHelp): string {
  return `${program.invocation} ${path}${h.usage ? ` ${h.usage}` : ''}`;
}

/** One command's help: its usage line, what it does, its notes, the exit statuses. */
export function commandHelp(program: Program, path: string, h: CommandHelp): string {
  return `Usage: ${usageLine(program, path, h)}\n\n${h.summary}\n${h.details ? `\n${h.details}` : ''}\n${EXIT_HELP}`;
}

/** A group's help: each subcommand's usage line and summary. */
function groupHelp(program: Program, name: string, g: CommandGroup): string {
  let text = `Usage: ${program.invocation} ${name} <${Object.keys(g.subcommands).join('|')}> [options]\n\n${g.summary}\n\n`;
  for (const [s, h] of Object.entries(g.subcommands)) text += `  ${usageLine(program, `${name} ${s}`, h)}\n      ${h.summary}\n`;
  return `${text}\n${EXIT_HELP}`;
}

/** Node's parseArgs errors (an unknown option, a missing value, a stray operand): the command line's fault. */
function isParseArgsError(err: unknown): err is Error {
  const code = (err as { code?: unknown } | null)?.code;
  return err instanceof Error && typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_');
}

/** Ends the process with the message and exit status a failure of the command at `path` deserves. */
function exitWith(err: unknown, program: Program, path: string, h: CommandHelp): never {
  if (err instanceof UsageError || isParseArgsError(err)) {
    // parseArgs explains how to pass an operand starting with '-' in a second sentence: the first says what is wrong.
    const msg = err instanceof UsageError ? err.message : (err.message.split(/(?<=\.) /)[0] ?? err.message);
    process.stderr.write(`error: ${msg}\nusage: ${usageLine(program, path, h)}\n(${program.invocation} ${path} --help for more)\n`);
    process.exit(EXIT.usage);
  }
  if (isServiceError(err))
    fail(`${err.code}: ${err.message}${err.details?.['reason'] ? ` (${String(err.details['reason'])})` : ''}`, EXIT.refused);
  if (err instanceof Refusal) fail(err.message, EXIT.refused);
  if (err instanceof SetupError) fail(err.message, EXIT.failure);
  fail(err instanceof Error ? err.message : String(err), EXIT.failure);
}

/** Runs the command argv names from the program's table; `--help` and `--version` anywhere they are asked for. */
export async function dispatch(argv: string[], program: Program): Promise<void> {
  const [name, ...rest] = argv;
  if (!name || HELP_FLAGS.has(name)) {
    process.stdout.write(programHelp(program));
    return;
  }
  if (name === 'help') return dispatch(rest.length ? [...rest, '--help'] : [], program);
  if (VERSION_FLAGS.has(name)) {
    process.stdout.write(versionLine(program));
    return;
  }
  const entry = program.commands[name];
  if (!entry) fail(`unknown command '${name}'; see ${program.invocation} --help`);
  let path = name;
  let help: CommandHelp = isGroup(entry) ? { summary: entry.summary, usage: `<${Object.keys(entry.subcommands).join('|')}>` } : entry;
  if (isGroup(entry)) {
    const [sub, ...opts] = rest;
    if (sub !== undefined && HELP_FLAGS.has(sub)) {
      process.stdout.write(groupHelp(program, name, entry));
      return;
    }
    const subHelp = sub !== undefined ? entry.subcommands[sub] : undefined;
    if (!subHelp)
      exitWith(
        new UsageError(sub === undefined ? `${name} needs a subcommand` : `unknown subcommand '${name} ${sub}'`),
        program,
        name,
        help,
      );
    path = `${name} ${sub}`;
    help = subHelp;
    if (wantsHelp(opts)) {
      process.stdout.write(commandHelp(program, path, help));
      return;
    }
  } else if (wantsHelp(rest)) {
    process.stdout.write(commandHelp(program, path, help));
    return;
  }
  try {
    await entry.run(rest);
  } catch (err) {
    exitWith(err, program, path, help);
  }
}
