// The Anthropic Messages API through the official `@anthropic-ai/sdk` client (v41-interface.md
// §5.5): thinking + text, streamed thinking + tool_use with the event order, a tool_use ->
// tool_result round trip, prefill, stop sequences, count_tokens, Anthropic error bodies.
// Structured answers use the test hook (helpers.mjs).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { startServer, dsmlCall, post, parseSse } from './helpers.mjs';

let server;
let client;
before(async () => {
  server = await startServer();
  client = new Anthropic({ baseURL: server.url + '/anthropic', apiKey: 'unused', maxRetries: 0,
                           timeout: 300000 });
});
after(async () => {
  const { code, signal } = await server.stop();
  assert.equal(signal, null, server.stderr);
  assert.equal(code, 0, server.stderr);
});

const TOOLS = [{ name: 'get_weather', description: 'Weather for a city',
                 input_schema: { type: 'object', properties: { city: { type: 'string' } },
                                 required: ['city'] } }];
const ASK = [{ role: 'user', content: 'Weather in Oslo?' }];

test('message with thinking and text blocks', async () => {
  const m = await client.messages.create({
    model: 'deepseek-v4-flash', max_tokens: 64, system: 'Be brief.',
    thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'hi' }],
    cedar_test_output: 'Greet back.</think>Hello!',
  });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.model, 'deepseek-v4-flash');  // echoed
  assert.deepEqual(m.content.map((b) => b.type), ['thinking', 'text']);
  assert.equal(m.content[0].thinking, 'Greet back.');
  assert.equal(typeof m.content[0].signature, 'string');
  assert.equal(m.content[1].text, 'Hello!');
  assert.equal(m.stop_reason, 'end_turn');
  assert.ok(m.usage.input_tokens > 0);
  assert.ok(m.usage.output_tokens > 0);
});

test('thinking disabled: only text', async () => {
  const m = await client.messages.create({
    model: 'deepseek-v4-flash', max_tokens: 16, thinking: { type: 'disabled' },
    messages: [{ role: 'user', content: 'hi' }], cedar_test_output: 'Hi there',
  });
  assert.deepEqual(m.content, [{ type: 'text', text: 'Hi there' }]);
});

test('streamed thinking + tool_use: event order and the accumulated message', async () => {
  const stream = client.messages.stream({
    model: 'deepseek-v4-flash', max_tokens: 256, tools: TOOLS, messages: ASK,
    thinking: { type: 'enabled', budget_tokens: 1024 },
    cedar_test_output: 'Need the tool.</think>' + dsmlCall('get_weather', { city: 'Oslo' }),
  });
  const m = await stream.finalMessage();
  assert.equal(m.stop_reason, 'tool_use');
  assert.deepEqual(m.content.map((b) => b.type), ['thinking', 'tool_use']);
  assert.equal(m.content[0].thinking, 'Need the tool.');
  const use = m.content[1];
  assert.equal(use.name, 'get_weather');
  assert.deepEqual(use.input, { city: 'Oslo' });
  assert.match(use.id, /^toolu_/);

  // Round trip: the tool_result goes back, the answer streams as text.
  const s2 = client.messages.stream({
    model: 'deepseek-v4-flash', max_tokens: 256, tools: TOOLS,
    thinking: { type: 'enabled', budget_tokens: 1024 },
    messages: [...ASK, { role: 'assistant', content: m.content },
               { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id,
                                           content: '-3 C, snow' }] }],
    cedar_test_output: 'Report it.</think>It is -3 C with snow in Oslo.',
  });
  let text = '';
  s2.on('text', (t) => { text += t; });
  const m2 = await s2.finalMessage();
  assert.equal(text, 'It is -3 C with snow in Oslo.');
  assert.equal(m2.stop_reason, 'end_turn');
  assert.ok(m2.usage.input_tokens + (m2.usage.cache_read_input_tokens ?? 0) >
            m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0));
});

test('raw stream: the event order of §5.5, ping after the first block start', async () => {
  const r = await post(server.url + '/v1/messages', {
    model: 'deepseek-v4-flash', max_tokens: 256, tools: TOOLS, messages: ASK, stream: true,
    thinking: { type: 'enabled', budget_tokens: 1024 },
    cedar_test_output: 'Need the tool.</think>' + dsmlCall('get_weather', { city: 'Oslo' }),
  });
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/event-stream/);
  const { frames } = parseSse(r.text);
  const types = frames.map((f) => {
    const d = JSON.parse(f.data);
    assert.equal(f.event, d.type, 'event: line names the data type');
    return d.type + (d.delta?.type ? ':' + d.delta.type : '') +
           (d.content_block ? ':' + d.content_block.type : '');
  });
  const squeezed = types.filter((t, i) => t !== types[i - 1]);
  assert.deepEqual(squeezed, [
    'message_start',
    'content_block_start:thinking', 'ping', 'content_block_delta:thinking_delta',
    'content_block_delta:signature_delta', 'content_block_stop',
    'content_block_start:tool_use', 'content_block_delta:input_json_delta', 'content_block_stop',
    'message_delta', 'message_stop',
  ]);
  const idx = frames.map((f) => JSON.parse(f.data).index).filter((i) => i !== undefined);
  assert.deepEqual([...new Set(idx)], [0, 1], 'block indexes count up from 0');
});

test('tool_use not streamed, stop_sequences, prefill', async () => {
  const m = await client.messages.create({
    model: 'deepseek-v4-flash', max_tokens: 64, tools: TOOLS, messages: ASK,
    thinking: { type: 'disabled' },
    cedar_test_output: 'Let me check.' + dsmlCall('get_weather', { city: 'Oslo' }),
  });
  assert.deepEqual(m.content.map((b) => b.type), ['text', 'tool_use']);
  assert.equal(m.content[0].text, 'Let me check.');
  assert.deepEqual(m.content[1].input, { city: 'Oslo' });

  const s = await client.messages.create({
    model: 'deepseek-v4-flash', max_tokens: 64, stop_sequences: ['###'],
    thinking: { type: 'disabled' }, messages: [{ role: 'user', content: 'go' }],
    cedar_test_output: 'alpha ### beta',
  });
  assert.equal(s.content[0].text, 'alpha ');
  assert.equal(s.stop_reason, 'stop_sequence');
  assert.equal(s.stop_sequence, '###');

  // A trailing assistant message is continued (prefill).
  const p = await client.messages.create({
    model: 'deepseek-v4-flash', max_tokens: 64, thinking: { type: 'disabled' },
    messages: [{ role: 'user', content: 'JSON please' }, { role: 'assistant', content: '{' }],
    cedar_test_output: '"a": 1}',
  });
  assert.equal(p.content[0].text, '"a": 1}');
});

test('count_tokens', async () => {
  const a = await client.messages.countTokens({
    model: 'deepseek-v4-flash', messages: [{ role: 'user', content: 'hi' }],
  });
  const b = await client.messages.countTokens({
    model: 'deepseek-v4-flash', messages: [{ role: 'user', content: 'hi there, a longer one' }],
    tools: TOOLS,
  });
  assert.ok(a.input_tokens > 0);
  assert.ok(b.input_tokens > a.input_tokens);
});

test('errors come back in the Anthropic shape', async () => {
  await assert.rejects(
    client.messages.create({ model: 'deepseek-v4-flash', messages: ASK }),  // no max_tokens
    (e) => e.status === 400 && e.error?.type === 'error' &&
           e.error?.error?.type === 'invalid_request_error' && /max_tokens/.test(e.message));
  await assert.rejects(
    client.messages.create({ model: 'deepseek-v4-flash', max_tokens: 8,
                             messages: [{ role: 'robot', content: 'x' }] }),
    (e) => e.status === 400 && /role/.test(e.message));
});
