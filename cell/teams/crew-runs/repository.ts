/**
 * The SQL of crew runs' own tables: the graphs runs executed, by hash.
 * Statements stay in the dialect both engines run (docs/storage.md).
 */
import { json, object } from '../../store/decode.ts';
import type { Reader, Tx } from '../../store/types.ts';

// ---------------------------------------------------------------- graphs runs executed

/** Keeps a compiled graph by its hash (a graph already kept stays as it is: equal hashes are equal graphs). */
export async function insertGraph(tx: Tx, graphHash: string, graph: unknown, at: number): Promise<void> {
  await tx.run('INSERT INTO team_graphs (graph_hash, graph, created_at) VALUES (?, ?, ?) ON CONFLICT (graph_hash) DO NOTHING', [
    graphHash,
    JSON.stringify(graph),
    at,
  ]);
}

/** Whether a graph is kept under that hash. */
export async function hasGraph(db: Reader, graphHash: string): Promise<boolean> {
  return (await db.get('SELECT 1 AS x FROM team_graphs WHERE graph_hash = ?', [graphHash])) !== undefined;
}

/** A kept graph (parsed JSON), or undefined. */
export async function graphByHash(db: Reader, graphHash: string): Promise<unknown> {
  const r = await db.get('SELECT graph FROM team_graphs WHERE graph_hash = ?', [graphHash]);
  return r ? json(r, 'graph', object) : undefined;
}
