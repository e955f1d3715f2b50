// Context caching (v41-interface.md §5.7): a repeated long prefix is reported as
// prompt_cache_hit_tokens / prompt_tokens_details.cached_tokens (OpenAI) and
// cache_read_input_tokens (Anthropic), served by the prefix cache across requests and slots.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startServer } from './helpers.mjs';

let server;
before(async () => { server = await startServer(['--parallel', '2']); });
after(async () => {
  const { code, signal } = await server.stop();
  assert.equal(signal, null, server.stderr);
  assert.equal(code, 0, server.stderr);
});

const SYSTEM = 'You follow this policy. ' + 'Rule: be precise and kind. '.repeat(80);

test('repeated long prefix: cache-hit tokens in usage', async () => {
  const client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'x', maxRetries: 0,
                              timeout: 300000 });
  const ask = (q) => client.chat.completions.create({
    model: 'deepseek-v4-flash', cedar_test_output: 'ok</think>ok',
    messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: q }],
  });
  const first = await ask('First question?');
  assert.equal(first.usage.prompt_cache_hit_tokens, 0, 'cold start');
  const second = await ask('A different second question?');
  const u = second.usage;
  assert.ok(u.prompt_tokens > 500);
  // Everything up to the user text is shared: nearly the whole prompt is a hit.
  assert.ok(u.prompt_cache_hit_tokens > 0.9 * first.usage.prompt_tokens, JSON.stringify(u));
  assert.equal(u.prompt_tokens_details.cached_tokens, u.prompt_cache_hit_tokens);
  assert.equal(u.prompt_cache_hit_tokens + u.prompt_cache_miss_tokens, u.prompt_tokens);

  const metrics = await (await fetch(server.url + '/metrics')).text();
  const hits = Number(metrics.match(/cedar_prompt_cache_hit_tokens_total (\d+)/)[1]);
  assert.ok(hits >= u.prompt_cache_hit_tokens);
});

test('Anthropic usage reports cache_read_input_tokens', async () => {
  const client = new Anthropic({ baseURL: server.url + '/anthropic', apiKey: 'x', maxRetries: 0,
                                 timeout: 300000 });
  const ask = (q) => client.messages.create({
    model: 'deepseek-v4-flash', max_tokens: 8, system: SYSTEM, thinking: { type: 'disabled' },
    messages: [{ role: 'user', content: q }], cedar_test_output: 'fine',
  });
  await ask('one?');
  const m = await ask('two?');
  assert.ok(m.usage.cache_read_input_tokens > 500, JSON.stringify(m.usage));
  assert.ok(m.usage.input_tokens < 50, 'input_tokens counts the uncached part');
});
