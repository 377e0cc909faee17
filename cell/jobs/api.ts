/**
 * The jobs module's face (docs/architecture.md, "Faces"): what another module of cell/ may use of
 * it. Nothing, on purpose: job runs, definitions, the scheduler and endpoints are reached through
 * the module's routes only, and the runs they make through the runs module. A module that comes to
 * need something of jobs gets it declared or re-exported here, never by importing another file.
 */
export {};
