/** A host set-up problem (missing file, runtime not installed): shown to the operator as is, never a stack. */
export class SetupError extends Error {
  override name = 'SetupError';
}
