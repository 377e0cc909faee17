/**
 * The cluster module's face (docs/architecture.md, "Faces"): what another module of cell/ may use
 * of it. `Cluster` is the instance (cell/cluster/cluster.ts: the group's members, the heartbeat,
 * `lapsedTx` for run claims, `onTick`, `qualifyingMembers`, `health()`); `GroupClock` is the
 * group's clock the scheduler reads; `qualifies` is the placement rule (does a member meet a run's
 * need).
 */
export {
  Cluster,
  ClusterRefusal,
  MEMBER_STATES,
  qualifies,
  type ClockReport,
  type GroupClock,
  type Member,
  type MemberState,
  type PlacementNeed,
} from './cluster.ts';
