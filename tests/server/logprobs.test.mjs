// logprobs through the official `openai` client: Chat Completions (`logprobs` + `top_logprobs`,
// streamed and not) and the legacy Completions form (`logprobs: N`). Real sampling on the tiny
// model: greedy decoding makes every chosen token the most likely one, which the test checks
// against the reported alternatives; the entries' bytes must spell the answer text.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './helpers.mjs';

let server;
let client;
before(async () => {
  server = await startServer(['--parallel', '2']);
  client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'unused', maxRetries: 0,
                        timeout: 300000 });
});
after(async () => {
  const { code, signal } = await server.stop();
  assert.equal(signal, null, server.stderr);
  assert.equal(code, 0, server.stderr);
});

const REQ = {
  model: 'deepseek-v4-flash', messages: [{ role: 'user', content: 'Count to five.' }],
  max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3,
};

function checkEntries(entries, text) {
  let bytes = [];
  for (const e of entries) {
    assert.ok(e.logprob <= 0 && Number.isFinite(e.logprob), `logprob ${e.logprob}`);
    assert.equal(e.top_logprobs.length, 3);
    for (let i = 1; i < 3; ++i)
      assert.ok(e.top_logprobs[i - 1].logprob >= e.top_logprobs[i].logprob, 'descending');
    // greedy: the chosen token is the most likely one
    assert.deepEqual(e.top_logprobs[0].bytes, e.bytes);
    assert.equal(e.top_logprobs[0].logprob, e.logprob);
    assert.equal(typeof e.token, 'string');
    bytes = bytes.concat(e.bytes);
  }
  assert.equal(Buffer.from(bytes).toString('utf8'), text, 'the entries spell the answer');
}

test('chat logprobs, not streamed and streamed, agree (thinking off)', async () => {
  const r = await client.chat.completions.create({ ...REQ, thinking: { type: 'disabled' } });
  const c = r.choices[0];
  assert.equal(c.logprobs.refusal, null);
  const entries = c.logprobs.content;
  // every completion token but a terminating stop token is an answer token here
  const expect = r.usage.completion_tokens - (c.finish_reason === 'stop' ? 1 : 0);
  assert.equal(entries.length, expect);
  assert.ok(entries.length > 0);
  checkEntries(entries, c.message.content);

  const stream = await client.chat.completions.create({
    ...REQ, thinking: { type: 'disabled' }, stream: true,
  });
  const got = [];
  let text = '';
  for await (const ch of stream) {
    if (ch.choices[0]?.logprobs?.content) got.push(...ch.choices[0].logprobs.content);
    text += ch.choices[0]?.delta?.content ?? '';
  }
  assert.equal(text, c.message.content);
  assert.deepEqual(got, entries, 'streamed entries equal the non-streamed ones');
});

test('chat logprobs cover the answer only, not the reasoning', async () => {
  const r = await client.chat.completions.create({
    ...REQ, max_tokens: 12, thinking: { type: 'enabled' },
    cedar_test_output: 'thinking hard</think>\n\nFive.',
  });
  const c = r.choices[0];
  assert.equal(c.message.reasoning_content, 'thinking hard');
  assert.match(c.message.content, /Five\.$/);
  const entries = c.logprobs.content;
  let bytes = [];
  for (const e of entries) {
    assert.ok(e.logprob <= 0);
    bytes = bytes.concat(e.bytes);
  }
  // the forced answer tokens after </think>, EOS excluded: they spell the answer
  assert.equal(Buffer.from(bytes).toString('utf8'), c.message.content);
  assert.equal(entries.length, r.usage.completion_tokens -
                               r.usage.completion_tokens_details.reasoning_tokens - 1);
});

test('legacy completions logprobs: tokens, token_logprobs, top_logprobs, text_offset', async () => {
  const r = await client.completions.create({
    model: 'deepseek-v4-flash', prompt: 'one two three', max_tokens: 6, temperature: 0,
    logprobs: 2,
  });
  const lp = r.choices[0].logprobs;
  const n = lp.tokens.length;
  assert.ok(n > 0);
  assert.equal(lp.token_logprobs.length, n);
  assert.equal(lp.top_logprobs.length, n);
  assert.equal(lp.text_offset.length, n);
  assert.equal(lp.text_offset[0], 0);
  for (let i = 0; i < n; ++i) {
    assert.ok(lp.token_logprobs[i] <= 0);
    const alts = Object.values(lp.top_logprobs[i]);
    assert.ok(alts.length >= 1 && alts.length <= 2);
    assert.equal(Math.max(...alts), lp.token_logprobs[i], 'greedy picks the top one');
    if (i > 0) assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1]);
  }
});

test('bad logprobs fields are 400s with the field named', async () => {
  for (const [body, param] of [
    [{ top_logprobs: 2 }, 'top_logprobs'],
    [{ logprobs: true, top_logprobs: 21 }, 'top_logprobs'],
    [{ logprobs: 'yes' }, 'logprobs'],
  ]) {
    await assert.rejects(
      client.chat.completions.create({ ...REQ, logprobs: undefined, top_logprobs: undefined,
                                       ...body }),
      (e) => e.status === 400 && e.param === param, JSON.stringify(body));
  }
  await assert.rejects(
    client.completions.create({ model: 'm', prompt: 'x', max_tokens: 2, logprobs: 6 }),
    (e) => e.status === 400 && e.param === 'logprobs');
});
