// runtime/timed-signal.ts and runtime/step-deadline.ts: a time bound joined with a parent signal that lets
// go of its timer and of its listener on the parent once the work ends (not AbortSignal.any + timeout,
// whose timer and registration outlive the call).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { StepTimeout } from '../../core/engine/timeout.ts';
import { stepDeadline } from '../../runtime/step-deadline.ts';
import { timedSignal } from '../../runtime/timed-signal.ts';

test('the time runs out: aborted with a TimeoutError, timedOut', async () => {
  const parent = new AbortController();
  const t = timedSignal(20, parent.signal);
  assert.equal(t.signal.aborted, false);
  await sleep(60);
  assert.equal(t.signal.aborted, true);
  assert.equal((t.signal.reason as DOMException).name, 'TimeoutError');
  assert.equal(t.timedOut(), true);
  t.release();
  assert.equal(getEventListeners(parent.signal, 'abort').length, 0);
});

test("the parent aborts: the parent's reason, not a timeout; an aborted parent aborts at once", async () => {
  const parent = new AbortController();
  const t = timedSignal(10_000, parent.signal);
  assert.equal(getEventListeners(parent.signal, 'abort').length, 1);
  parent.abort(new Error('cancelled'));
  assert.equal(t.signal.aborted, true);
  assert.equal((t.signal.reason as Error).message, 'cancelled');
  assert.equal(t.timedOut(), false);
  t.release();
  const late = timedSignal(10_000, parent.signal);
  assert.equal(late.signal.aborted, true);
  assert.equal(late.timedOut(), false);
  assert.equal(getEventListeners(parent.signal, 'abort').length, 0);
});

test('released: the timer never fires and the parent holds no listener; release twice is harmless', async () => {
  const parent = new AbortController();
  const t = timedSignal(20, parent.signal);
  t.release();
  t.release();
  assert.equal(getEventListeners(parent.signal, 'abort').length, 0);
  await sleep(60);
  assert.equal(t.signal.aborted, false, 'the released timer did not fire');
  parent.abort();
  assert.equal(t.signal.aborted, false, 'the released signal no longer follows the parent');
  assert.equal(t.timedOut(), false);
});

test("a step's deadline: race releases it once the call settles, and ends a late call with StepTimeout", async () => {
  const driver = new AbortController();
  const quick = stepDeadline(10_000, driver.signal);
  assert.equal(await quick.race(Promise.resolve('done')), 'done');
  assert.equal(getEventListeners(driver.signal, 'abort').length, 0, 'nothing left on the run driver');
  const slow = stepDeadline(20, driver.signal);
  await assert.rejects(slow.race(new Promise(() => undefined)), (e) => e instanceof StepTimeout);
  assert.equal(slow.timedOut(), true);
  assert.equal(getEventListeners(driver.signal, 'abort').length, 0);
  // A call that fails because it was stopped at the deadline fails as the timeout.
  const stopped = stepDeadline(20, driver.signal);
  const call = new Promise((_, reject) => stopped.signal!.addEventListener('abort', () => reject(new Error('aborted'))));
  await assert.rejects(stopped.race(call), (e) => e instanceof StepTimeout);
  // The driver's cancel is not a timeout: the call's own failure stands.
  const cancelled = stepDeadline(10_000, driver.signal);
  const call2 = new Promise((_, reject) => cancelled.signal!.addEventListener('abort', () => reject(new Error('cancelled'))));
  driver.abort();
  await assert.rejects(cancelled.race(call2), /cancelled/);
  assert.equal(cancelled.timedOut(), false);
});

test('no timeout: the other signal as it is, nothing to release', async () => {
  const driver = new AbortController();
  const d = stepDeadline(undefined, driver.signal);
  assert.equal(d.signal, driver.signal);
  assert.equal(await d.race(Promise.resolve(1)), 1);
  d.release();
  assert.equal(stepDeadline(undefined).signal, undefined);
});
