// core/errors.ts: the spec's Errors table, the envelope shape, no internal text on the wire.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  ERROR_STATUS,
  ServiceError,
  conflict,
  forbidden,
  invalid,
  isServiceError,
  notFound,
  toEnvelope,
  unauthorized,
} from '../../core/errors.ts';

test("codes and statuses are exactly the service spec's Errors table, and 405 (issue 25)", () => {
  assert.deepEqual(ERROR_STATUS, {
    invalid_request: 400,
    unauthorized: 401,
    forbidden: 403,
    not_found: 404,
    method_not_allowed: 405,
    conflict: 409,
    rate_limited: 429,
    internal_error: 500,
    service_unavailable: 503,
  });
});

test('a ServiceError envelope carries error + message, and details/retryable only when meaningful', () => {
  assert.deepEqual(new ServiceError('forbidden', 'no').toEnvelope('c1'), { error: 'forbidden', message: 'no' });
  // @ts-expect-error 'x' is not a declared reason (core/reasons.ts); the envelope passes details through as they are
  assert.deepEqual(invalid('bad', { reason: 'x' }).toEnvelope(), { error: 'invalid_request', message: 'bad', details: { reason: 'x' } });
  assert.equal(notFound('key').status, 404);
  assert.equal(conflict('c').status, 409);
  assert.equal(forbidden('f').status, 403);
  assert.equal(unauthorized().status, 401);
  assert.equal(unauthorized().message, 'no valid credential');
});

test('429 is retryable: true, and can carry Retry-After', () => {
  const e = new ServiceError('rate_limited', 'slow down', { headers: { 'Retry-After': '3' } });
  assert.equal(e.status, 429);
  assert.equal(e.toEnvelope().retryable, true);
  assert.equal(e.headers?.['Retry-After'], '3');
  assert.equal(new ServiceError('forbidden', 'x').toEnvelope().retryable, undefined);
});

test('5xx carries the correlation id; 4xx never does', () => {
  assert.equal(toEnvelope(new ServiceError('service_unavailable', 'down'), 'corr-1').body.correlation_id, 'corr-1');
  assert.equal(toEnvelope(new ServiceError('conflict', 'c'), 'corr-2').body.correlation_id, undefined);
});

test('anything that is not a ServiceError becomes internal_error without its text', () => {
  for (const thrown of [
    new Error('SQLITE_CONSTRAINT: secret table api_keys'),
    new TypeError('x is undefined'),
    'string',
    null,
    { code: 'forbidden' },
  ]) {
    const { status, body } = toEnvelope(thrown, 'corr-3');
    assert.equal(status, 500);
    assert.deepEqual(body, { error: 'internal_error', message: 'unexpected server failure', correlation_id: 'corr-3' });
    assert.ok(!JSON.stringify(body).includes('SQLITE'));
  }
});

test('isServiceError tells errors apart by name and code (works across bundles), not instanceof', () => {
  assert.equal(isServiceError(new ServiceError('conflict', 'x')), true);
  const foreign = Object.assign(new Error('x'), { name: 'ServiceError', code: 'not_found', status: 404 });
  assert.equal(isServiceError(foreign), true);
  assert.equal(isServiceError(Object.assign(new Error('x'), { name: 'ServiceError', code: 'teapot' })), false);
  assert.equal(isServiceError(new Error('x')), false);
  assert.equal(isServiceError(null), false);
});
