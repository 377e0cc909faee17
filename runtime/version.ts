/**
 * The programs' version, package.json's `version`. scripts/build.mjs gives the bundles (dist/cell.mjs,
 * dist/edge.mjs, the single executable dist/edge) that one field of package.json at build time, so a
 * shipped file says what it is with no package.json beside it. `--version` prints it; the cell's traces
 * carry it (`service.version`, the tracer's version).
 */
import pkg from '../package.json' with { type: 'json' };

export const PROGRAM_VERSION: string = pkg.version;
