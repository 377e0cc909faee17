/**
 * The console module's face (docs/architecture.md, "Faces"): what another module of cell/ may use
 * of it. Nothing, on purpose: it serves the operator console's static files and registers the
 * console's OAuth client; cell/server.ts mounts it. A module that comes to need something of the
 * console gets it declared or re-exported here, never by importing another file.
 */
export {};
