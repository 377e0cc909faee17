// esbuild plugin used by scripts/build.mjs: replaces cell/console/internal/assets.ts
// with a module that embeds the console's built files (console/build.mjs) as
// strings, so /console works from dist/cell.mjs alone.

/** @param {Record<string, {body: string, contentType: string}>} files from buildConsole() */
export function embedConsole(files) {
  return {
    name: 'embed-console',
    setup(build) {
      build.onLoad({ filter: /[\\/]cell[\\/]console[\\/]internal[\\/]assets\.ts$/ }, () => ({
        loader: 'js',
        contents: [`const FILES = ${JSON.stringify(files)};`, 'export function consoleFiles() { return Promise.resolve(FILES); }'].join(
          '\n',
        ),
      }));
    },
  };
}
