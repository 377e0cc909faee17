// Types of console/build.mjs for the TypeScript code that imports it (cell/console/internal/assets.ts).
export interface ConsoleFile {
  body: string;
  contentType: string;
}
export declare const CONSOLE_TARGETS: string[];
export declare function buildConsole(opts?: { minify?: boolean }): Promise<Record<string, ConsoleFile>>;
