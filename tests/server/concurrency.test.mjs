// 16 concurrent streaming clients (real sampling) against one server: every stream finishes
// with correct SSE framing (role chunk first, one final chunk with finish_reason and usage,
// then data: [DONE]), and the official client reads the same kind of streams concurrently.
// Also: `: keep-alive` comments while a long prompt prefills.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, parseSse } from './helpers.mjs';

let server;
before(async () => { server = await startServer(['--parallel', '16', '--keepalive-ms', '200']); });
after(async () => {
  const { code, signal } = await server.stop();
  assert.equal(signal, null, server.stderr);
  assert.equal(code, 0, server.stderr);
});

const N = 16;
const MAX = 12;

async function rawStream(i) {
  const res = await fetch(server.url + '/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'deepseek-v4-flash', stream: true, max_tokens: MAX, seed: i,
      thinking: { type: i % 2 ? 'enabled' : 'disabled' },
      messages: [{ role: 'user', content: `Client ${i}: tell me something.` }],
    }),
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/event-stream/);
  const { frames } = parseSse(await res.text());
  assert.equal(frames.at(-1).data, '[DONE]', 'the stream ends with data: [DONE]');
  const chunks = frames.slice(0, -1).map((f) => JSON.parse(f.data));
  assert.ok(chunks.length >= 2);
  const id = chunks[0].id;
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  for (const [k, c] of chunks.entries()) {
    assert.equal(c.id, id);
    assert.equal(c.object, 'chat.completion.chunk');
    assert.equal(c.choices.length, 1);
    const last = k === chunks.length - 1;
    assert.equal(c.choices[0].finish_reason !== null, last, 'finish_reason only on the last chunk');
    assert.equal('usage' in c, last, 'without include_usage only the last chunk has usage');
  }
  const u = chunks.at(-1).usage;
  assert.ok(u.completion_tokens >= 1 && u.completion_tokens <= MAX);
  return u.completion_tokens;
}

function metric(text, name) {
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  assert.ok(line, `${name} in /metrics`);
  return Number(line.split(' ')[1]);
}

test(`${N} concurrent raw SSE streams finish with correct framing`, async () => {
  const before = await (await fetch(server.url + '/metrics')).text();
  const counts = await Promise.all(Array.from({ length: N }, (_, i) => rawStream(i)));
  assert.equal(counts.length, N);
  const h = await (await fetch(server.url + '/health')).json();
  assert.equal(h.active, 0);
  assert.equal(h.queued, 0);
  // continuous batching: the streams' forward calls shared passes (fewer passes than calls,
  // and some pass served several requests at once)
  const after = await (await fetch(server.url + '/metrics')).text();
  const passes = metric(after, 'cedar_forward_passes_total') -
                 metric(before, 'cedar_forward_passes_total');
  const calls = metric(after, 'cedar_forward_calls_total') -
                metric(before, 'cedar_forward_calls_total');
  assert.ok(calls >= counts.reduce((s, n) => s + n, 0), `calls ${calls}`);
  assert.ok(passes < calls, `passes ${passes} < calls ${calls}`);
  assert.ok(metric(after, 'cedar_forward_pass_max_calls') >= 4,
            'some pass decoded at least 4 requests together');
});

test(`${N} concurrent streams through the official client`, async () => {
  const client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'x', maxRetries: 0,
                              timeout: 300000 });
  const one = async (i) => {
    const stream = await client.chat.completions.create({
      model: 'deepseek-v4-flash', stream: true, max_tokens: 6, seed: 100 + i,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: `SDK client ${i}` }],
    });
    let finish = null;
    let usage = null;
    for await (const ch of stream) {
      if (ch.choices[0]?.finish_reason) finish = ch.choices[0].finish_reason;
      if (ch.usage) usage = ch.usage;
    }
    assert.ok(finish);
    assert.ok(usage.completion_tokens >= 1 && usage.completion_tokens <= 6);
  };
  await Promise.all(Array.from({ length: N }, (_, i) => one(i)));
});

test('keep-alive comments while a long prompt prefills', async () => {
  // ~10,000 prompt tokens take about 2 s to prefill even on the fast kernels, ten keep-alive
  // periods of 200 ms (~1,500 took about 300 ms, and the test failed now and then).
  const res = await fetch(server.url + '/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', stream: true, max_tokens: 2,
                           messages: [{ role: 'user', content: 'lorem ipsum '.repeat(5000) }] }),
  });
  const { frames, comments } = parseSse(await res.text());
  assert.ok(comments.length >= 1, 'at least one keep-alive comment');
  for (const c of comments) assert.equal(c, ': keep-alive');
  assert.equal(frames.at(-1).data, '[DONE]');
});
