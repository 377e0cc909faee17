import assert from 'node:assert/strict';
import { test } from 'node:test';
import { classifyHost, postureAllows } from '../../../cell/ai/posture.ts';
import { POSTURES } from '../../../cell/config.ts';

test('hosts are classified loopback, private or public', () => {
  assert.equal(classifyHost('127.0.0.1'), 'loopback');
  assert.equal(classifyHost('[::1]'), 'loopback');
  assert.equal(classifyHost('localhost'), 'loopback');
  assert.equal(classifyHost('10.1.2.3'), 'private');
  assert.equal(classifyHost('192.168.0.9'), 'private');
  assert.equal(classifyHost('[fd00::1]'), 'private');
  assert.equal(classifyHost('8.8.8.8'), 'public');
  assert.equal(classifyHost('api.openai.com'), 'public');
  assert.equal(classifyHost('[::ffff:10.0.0.1]'), 'private');
});

test('the rule table: public providers only under cloud-enabled and https', () => {
  for (const posture of POSTURES) {
    assert.equal(postureAllows(posture, { provider_type: 'openai-compatible', base_url: 'http://127.0.0.1:1/v1' }).allowed, true);
    assert.equal(postureAllows(posture, { provider_type: 'openai-compatible', base_url: 'http://10.0.0.5/v1' }).allowed, true);
    assert.equal(postureAllows(posture, { provider_type: 'local-signed' }).allowed, true);
    assert.equal(postureAllows(posture, { provider_type: 'openai-compatible', base_url: 'http://api.example.com/v1' }).allowed, false);
    const pub = postureAllows(posture, { provider_type: 'openai-compatible', base_url: 'https://api.example.com/v1' });
    assert.equal(pub.allowed, posture === 'cloud-enabled', posture);
  }
  const s = postureAllows('sovereign', { provider_type: 'openai-compatible', base_url: 'https://api.openai.com/v1' });
  assert.equal(s.rule, 'public-needs-cloud-enabled');
});

test('malformed and unknown providers are refused', () => {
  assert.equal(postureAllows('cloud-enabled', { provider_type: 'magic', base_url: 'https://x.example' }).rule, 'unknown-type');
  assert.equal(postureAllows('cloud-enabled', { provider_type: 'openai-compatible' }).rule, 'url-required');
  assert.equal(postureAllows('cloud-enabled', { provider_type: 'openai-compatible', base_url: 'ftp://x' }).rule, 'url-scheme');
  assert.equal(
    postureAllows('cloud-enabled', { provider_type: 'openai-compatible', base_url: 'https://u:p@x.example' }).rule,
    'url-credentials',
  );
  assert.equal(postureAllows('single-cell', { provider_type: 'local-signed', base_url: 'http://127.0.0.1' }).allowed, false);
});
