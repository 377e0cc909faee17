// esbuild plugin used by scripts/build.mjs: replaces
// cell/discovery/internal/swagger-files.ts with a module that embeds swagger-ui-dist's
// files as strings, so the docs page works from dist/cell.mjs alone.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const FILES = ['swagger-ui-bundle.js', 'swagger-ui.css'];

export const embedSwaggerUi = {
  name: 'embed-swagger-ui',
  setup(build) {
    build.onLoad({ filter: /[\\/]cell[\\/]discovery[\\/]internal[\\/]swagger-files\.ts$/ }, () => {
      const dir = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
      const embedded = Object.fromEntries(FILES.map((f) => [f, readFileSync(join(dir, f), 'utf8')]));
      return {
        loader: 'js',
        contents: [
          `export const SWAGGER_FILES = ${JSON.stringify(FILES)};`,
          `const EMBEDDED = ${JSON.stringify(embedded)};`,
          'export function swaggerFile(name) { return EMBEDDED[name]; }',
        ].join('\n'),
      };
    });
  },
};
