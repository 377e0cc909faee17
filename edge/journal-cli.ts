/** `edge journal export RUN --data DIR --out FILE` (filled in with offline runs). */
export async function journalCommand(argv: string[]): Promise<void> {
  throw new Error(`journal export is not available yet (${argv.join(' ')})`);
}
