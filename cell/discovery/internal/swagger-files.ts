/**
 * Reads swagger-ui-dist's files from the installed package. The bundle
 * (scripts/build.mjs, with ./build-plugin.mjs) replaces this module with one
 * that embeds the same files as strings, so dist/cell.mjs needs no
 * node_modules beside it.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** The swagger-ui-dist files the docs page uses. */
export const SWAGGER_FILES = ['swagger-ui-bundle.js', 'swagger-ui.css'] as const;
export type SwaggerFile = (typeof SWAGGER_FILES)[number];

/** The text of one swagger-ui-dist file. */
export function swaggerFile(name: SwaggerFile): string {
  const dir = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  return readFileSync(join(dir, name), 'utf8');
}
