/**
 * The console's built files when the cell runs from source: console/build.mjs
 * bundles console/src with esbuild (a development dependency) on the first
 * request, once. The bundle (scripts/build.mjs, with ./build-plugin.mjs)
 * replaces this module with one that embeds the same files as strings, so
 * dist/cell.mjs needs neither esbuild nor console/ beside it.
 */
export interface ConsoleFile {
  body: string;
  contentType: string;
}

let loading: Promise<Record<string, ConsoleFile>> | null = null;

/** The console's files by name: console.js, callback.js, console.css. */
export function consoleFiles(): Promise<Record<string, ConsoleFile>> {
  loading ??= import('../../../console/build.mjs').then((m) => m.buildConsole());
  loading.catch(() => {
    loading = null;
  });
  return loading;
}
