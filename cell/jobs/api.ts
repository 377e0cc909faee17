/**
 * The jobs module's face (docs/architecture.md, "Faces"): what another module of cell/ may use of
 * it: the graph of a job run (the receipts module's attestations name it). Job runs, definitions, the
 * scheduler and endpoints are reached through the module's routes only, and the runs they make through
 * the runs module. A module that comes to need something of jobs gets it declared or re-exported here,
 * never by importing another file.
 */
export { jobGraph } from './graph.ts';
