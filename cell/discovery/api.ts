/**
 * The discovery module's face (docs/architecture.md, "Faces"): what another module of cell/ may use
 * of it. Nothing, on purpose: it builds the OpenAPI document and the docs page from every route
 * mounted before it; cell/server.ts mounts it. A module that comes to need something of discovery
 * gets it declared or re-exported here, never by importing another file.
 */
export {};
