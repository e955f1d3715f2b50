// FIM and plain completions (POST /v1/completions, also under /beta; v41-interface.md §3.11)
// through the official `openai` client: real sampling, streamed and not; the raw path (no
// think/DSML parsing) with the test hook; stop sequences.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './helpers.mjs';

let server;
let beta;
before(async () => {
  server = await startServer();
  beta = new OpenAI({ baseURL: server.url + '/beta', apiKey: 'unused', maxRetries: 0,
                      timeout: 300000 });
});
after(async () => {
  const { code, signal } = await server.stop();
  assert.equal(signal, null, server.stderr);
  assert.equal(code, 0, server.stderr);
});

test('FIM with prompt + suffix, real sampling', async () => {
  const r = await beta.completions.create({
    model: 'deepseek-v4-flash', prompt: 'def add(a, b):\n', suffix: '\n    return c\n',
    max_tokens: 5, temperature: 0,
  });
  assert.equal(r.object, 'text_completion');
  assert.match(r.id, /^cmpl-/);
  assert.equal(typeof r.choices[0].text, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.completion_tokens <= 5 && r.usage.prompt_tokens > 5);
  // The suffix is part of the prompt (<｜fim▁begin｜>…<｜fim▁hole｜>…<｜fim▁end｜>).
  const plain = await beta.completions.create({
    model: 'deepseek-v4-flash', prompt: 'def add(a, b):\n', max_tokens: 1, temperature: 0,
  });
  assert.ok(plain.usage.prompt_tokens < r.usage.prompt_tokens);
});

test('FIM streamed: text chunks, then finish_reason and usage', async () => {
  const stream = await beta.completions.create({
    model: 'deepseek-v4-flash', prompt: 'x = ', suffix: '\nprint(x)', max_tokens: 6,
    stream: true, seed: 3,
  });
  const chunks = [];
  for await (const ch of stream) chunks.push(ch);
  const last = chunks.at(-1);
  assert.ok(last.choices[0].finish_reason);
  assert.ok(last.usage.completion_tokens > 0);
  for (const ch of chunks.slice(0, -1)) assert.equal(ch.choices[0].finish_reason, null);
});

test('FIM output is raw text (no reasoning / DSML parsing); stop sequences apply', async () => {
  const r = await beta.completions.create({
    model: 'deepseek-v4-flash', prompt: 'a', suffix: 'z', stop: ['STOP'],
    cedar_test_output: ' b </think> c STOP d',
  });
  assert.equal(r.choices[0].text, ' b </think> c ');
  assert.equal(r.choices[0].finish_reason, 'stop');
  const v1 = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'unused', maxRetries: 0 });
  const r2 = await v1.completions.create({ model: 'm', prompt: 'p', cedar_test_output: 'middle' });
  assert.equal(r2.choices[0].text, 'middle');
});
