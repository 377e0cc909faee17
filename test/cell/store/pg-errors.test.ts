/**
 * How the PostgreSQL engine reads a driver's errors (cell/store/internal/pg-errors.ts): a socket's
 * error code shaped like a SQLSTATE (EPIPE, which a pipelined connection meets when it writes to a
 * server that just died) is a lost connection, not a SQL error passed through.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isConnectionLost, isRetryable, sqlState } from '../../../cell/store/internal/pg-errors.ts';

describe('pg errors', () => {
  it('EPIPE is a lost connection, not a SQLSTATE', () => {
    const epipe = Object.assign(new Error('write EPIPE'), { code: 'EPIPE', errno: -32, syscall: 'write' });
    assert.equal(sqlState(epipe), undefined);
    assert.equal(isConnectionLost(epipe), true);
    assert.equal(isRetryable(epipe), false);
  });

  it('SQLSTATEs keep their meaning', () => {
    assert.equal(isRetryable({ code: '40001', message: 'could not serialize access' }), true);
    assert.equal(isConnectionLost({ code: '57P01', message: 'terminating connection' }), true);
    assert.equal(isConnectionLost({ code: '23505', message: 'duplicate key' }), false);
  });
});
