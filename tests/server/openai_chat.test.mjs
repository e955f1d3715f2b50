// Chat Completions through the official `openai` client: plain and streamed chat (real sampling),
// thinking on/off, a tool-call round trip (non-streamed and streamed), JSON mode, Chat Prefix
// Completion, stop sequences, max_tokens, usage fields (v41-interface.md §5.2-§5.4).
// Structured answers use the test hook (see helpers.mjs): `cedar_test_output`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, dsmlCall, WEATHER_TOOL } from './helpers.mjs';

let server;
let client;
before(async () => {
  server = await startServer(['--parallel', '2']);
  client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'unused', maxRetries: 0,
                        timeout: 300000 });
});
after(async () => {
  const { code, signal } = await server.stop();
  assert.equal(signal, null, 'server died by a signal: ' + server.stderr);
  assert.equal(code, 0, 'server exit status: ' + server.stderr);
});

function checkUsage(u, maxCompletion) {
  assert.ok(u.prompt_tokens > 0);
  assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);
  assert.equal(u.prompt_cache_hit_tokens + u.prompt_cache_miss_tokens, u.prompt_tokens);
  assert.equal(u.prompt_tokens_details.cached_tokens, u.prompt_cache_hit_tokens);
  assert.ok(u.completion_tokens_details.reasoning_tokens <= u.completion_tokens);
  if (maxCompletion !== undefined) assert.ok(u.completion_tokens <= maxCompletion);
}

const USER = [{ role: 'user', content: 'Say hello.' }];

test('plain chat, real sampling (thinking off)', async () => {
  const r = await client.chat.completions.create({
    model: 'deepseek-v4-flash', messages: USER, max_tokens: 6, temperature: 0,
    thinking: { type: 'disabled' },
  });
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.model, 'deepseek-v4-flash');
  const c = r.choices[0];
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.equal(c.message.reasoning_content, undefined, 'no reasoning in chat mode');
  assert.ok(['stop', 'length', 'tool_calls'].includes(c.finish_reason));
  checkUsage(r.usage, 6);
  assert.equal(r.usage.completion_tokens_details.reasoning_tokens, 0);
  // Greedy decoding is deterministic: the same request gives the same answer.
  const again = await client.chat.completions.create({
    model: 'deepseek-v4-flash', messages: USER, max_tokens: 6, temperature: 0,
    thinking: { type: 'disabled' },
  });
  assert.equal(again.choices[0].message.content, c.message.content);
});

test('streamed chat, real sampling: role chunk first, one final chunk with usage', async () => {
  const stream = await client.chat.completions.create({
    model: 'deepseek-v4-flash', messages: USER, max_tokens: 8, stream: true,
    stream_options: { include_usage: true }, seed: 7,
  });
  const chunks = [];
  for await (const ch of stream) chunks.push(ch);
  assert.ok(chunks.length >= 2);
  const first = chunks[0].choices[0].delta;
  // Thinking (the default): {"role":"assistant","content":null,"reasoning_content":""}.
  assert.equal(first.role, 'assistant');
  assert.equal(first.content, null);
  assert.equal(first.reasoning_content, '');
  const last = chunks.at(-1);
  assert.ok(last.choices[0].finish_reason);
  checkUsage(last.usage, 8);
  for (const ch of chunks.slice(0, -1)) {
    assert.equal(ch.choices[0].finish_reason, null);
    assert.equal(ch.usage, null, 'include_usage: usage is null except on the last chunk');
    assert.equal(ch.id, last.id);
    assert.equal(ch.object, 'chat.completion.chunk');
  }
});

test('thinking on: reasoning_content then content; reasoning tokens counted', async () => {
  const r = await client.chat.completions.create({
    model: 'deepseek-v4-flash', messages: USER, reasoning_effort: 'max',
    cedar_test_output: 'The user wants a greeting.</think>Hello!',
  });
  const m = r.choices[0].message;
  assert.equal(m.reasoning_content, 'The user wants a greeting.');
  assert.equal(m.content, 'Hello!');
  assert.equal(r.choices[0].finish_reason, 'stop');
  const u = r.usage;
  assert.ok(u.completion_tokens_details.reasoning_tokens > 0);
  assert.ok(u.completion_tokens_details.reasoning_tokens < u.completion_tokens);
});

test('thinking off: no reasoning, first delta {"role","content":""}', async () => {
  const stream = await client.chat.completions.create({
    model: 'deepseek-v4-flash', messages: USER, stream: true, thinking: { type: 'disabled' },
    cedar_test_output: 'Hello there',
  });
  const deltas = [];
  for await (const ch of stream) deltas.push(ch.choices[0]);
  assert.deepEqual(deltas[0].delta, { role: 'assistant', content: '' });
  const text = deltas.map((d) => d.delta.content ?? '').join('');
  assert.equal(text, 'Hello there');
  for (const d of deltas) assert.equal(d.delta.reasoning_content, undefined);
  assert.equal(deltas.at(-1).finish_reason, 'stop');
});

test('thinking stream order: reasoning deltas, then content deltas, then the final chunk', async () => {
  const stream = await client.chat.completions.create({
    model: 'deepseek-v4-flash', messages: USER, stream: true,
    cedar_test_output: 'Think a bit more.</think>Answer text.',
  });
  const kinds = [];
  let reasoning = '';
  let content = '';
  for await (const ch of stream) {
    const d = ch.choices[0].delta;
    if (d.reasoning_content) { kinds.push('r'); reasoning += d.reasoning_content; assert.equal(d.content, null); }
    if (d.content) { kinds.push('c'); content += d.content; assert.equal(d.reasoning_content, null); }
    if (ch.choices[0].finish_reason) kinds.push('f');
  }
  assert.equal(reasoning, 'Think a bit more.');
  assert.equal(content, 'Answer text.');
  assert.match(kinds.join(''), /^r+c+f$/);
});

const TOOLS = [WEATHER_TOOL];
const ASK = [{ role: 'system', content: 'You are a weather bot.' },
             { role: 'user', content: 'Weather in Paris for 3 days?' }];
const CALL = 'I should call the tool.</think>' + dsmlCall('get_weather', { city: 'Paris', days: 3 });

test('tool-call round trip, not streamed: call -> tool result -> answer', async () => {
  const r1 = await client.chat.completions.create({
    model: 'deepseek-v4-flash', messages: ASK, tools: TOOLS, cedar_test_output: CALL,
  });
  const m1 = r1.choices[0].message;
  assert.equal(r1.choices[0].finish_reason, 'tool_calls');
  assert.equal(m1.content, null, 'no answer text beside the call');
  assert.equal(m1.reasoning_content, 'I should call the tool.');
  assert.equal(m1.tool_calls.length, 1);
  const call = m1.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris', days: 3 });
  assert.ok(call.id.startsWith('call_'));

  const history = [...ASK, m1, { role: 'tool', tool_call_id: call.id, content: '{"temp": 21}' }];
  const r2 = await client.chat.completions.create({
    model: 'deepseek-v4-flash', messages: history, tools: TOOLS,
    cedar_test_output: 'The tool answered.</think>It will be 21 degrees in Paris.',
  });
  assert.equal(r2.choices[0].finish_reason, 'stop');
  assert.equal(r2.choices[0].message.content, 'It will be 21 degrees in Paris.');
  assert.equal(r2.choices[0].message.tool_calls, undefined);
  assert.ok(r2.usage.prompt_tokens > r1.usage.prompt_tokens);
  // The second prompt extends the first one (tools keep the reasoning, §3.3): the slot that ran
  // the call reuses its state, reported as cache-hit tokens.
  assert.ok(r2.usage.prompt_cache_hit_tokens >= r1.usage.prompt_tokens,
            JSON.stringify(r2.usage));
  // An unknown tool_call_id is a clear 400.
  await assert.rejects(
    client.chat.completions.create({
      model: 'deepseek-v4-flash', tools: TOOLS,
      messages: [...ASK, m1, { role: 'tool', tool_call_id: 'nope', content: 'x' }],
    }),
    (e) => e.status === 400 && /tool_call_id "nope"/.test(e.message));
});

test('tool-call round trip, streamed: incremental arguments', async () => {
  const stream = await client.chat.completions.create({
    model: 'deepseek-v4-flash', messages: ASK, tools: TOOLS, stream: true,
    cedar_test_output: CALL,
  });
  const calls = [];
  let finish = null;
  let argDeltas = 0;
  for await (const ch of stream) {
    const c = ch.choices[0];
    for (const tc of c.delta.tool_calls ?? []) {
      if (tc.id) {
        // First delta of a call: index, id, type, name and empty arguments.
        assert.equal(tc.type, 'function');
        assert.equal(tc.function.arguments, '');
        calls[tc.index] = { id: tc.id, name: tc.function.name, arguments: '' };
      } else {
        calls[tc.index].arguments += tc.function.arguments;
        argDeltas++;
      }
    }
    if (c.finish_reason) finish = c.finish_reason;
    // No DSML markup ever leaks into text.
    assert.ok(!(c.delta.content ?? '').includes('DSML'));
    assert.ok(!(c.delta.reasoning_content ?? '').includes('DSML'));
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, 'get_weather');
  assert.ok(argDeltas > 1, 'arguments arrive in several fragments');
  assert.deepEqual(JSON.parse(calls[0].arguments), { city: 'Paris', days: 3 });

  const history = [...ASK,
    { role: 'assistant', content: null, reasoning_content: 'I should call the tool.',
      tool_calls: [{ id: calls[0].id, type: 'function',
                     function: { name: calls[0].name, arguments: calls[0].arguments } }] },
    { role: 'tool', tool_call_id: calls[0].id, content: 'sunny' }];
  const s2 = await client.chat.completions.create({
    model: 'deepseek-v4-flash', messages: history, tools: TOOLS, stream: true,
    cedar_test_output: 'ok</think>Sunny.',
  });
  let text = '';
  for await (const ch of s2) text += ch.choices[0].delta.content ?? '';
  assert.equal(text, 'Sunny.');
});

test('JSON mode: response_format json_object', async () => {
  const r = await client.chat.completions.create({
    model: 'deepseek-v4-flash', thinking: { type: 'disabled' },
    messages: [{ role: 'user', content: 'Give me a JSON object with a=1.' }],
    response_format: { type: 'json_object' },
    cedar_test_output: '{"a": 1}',
  });
  assert.deepEqual(JSON.parse(r.choices[0].message.content), { a: 1 });
  // The API rule: the prompt must mention json.
  await assert.rejects(
    client.chat.completions.create({
      model: 'deepseek-v4-flash', messages: USER, response_format: { type: 'json_object' },
    }),
    (e) => e.status === 400 && /must contain the word 'json'/.test(e.message));
});

test('Chat Prefix Completion (beta): continue the assistant prefix, stop at ```', async () => {
  const beta = new OpenAI({ baseURL: server.url + '/beta', apiKey: 'unused', maxRetries: 0 });
  const r = await beta.chat.completions.create({
    model: 'deepseek-v4-flash', thinking: { type: 'disabled' }, stop: ['```'],
    messages: [{ role: 'user', content: 'Write quicksort in Python.' },
               { role: 'assistant', content: '```python\n', prefix: true }],
    cedar_test_output: 'def qs(a): return a\n```\nThat is all.',
  });
  assert.equal(r.choices[0].message.content, 'def qs(a): return a\n');
  assert.equal(r.choices[0].finish_reason, 'stop');
  // A prefix message that is not last is refused with a clear message.
  await assert.rejects(
    beta.chat.completions.create({
      model: 'deepseek-v4-flash',
      messages: [{ role: 'assistant', content: 'x', prefix: true }, ...USER],
    }),
    (e) => e.status === 400 && /prefix/.test(e.message));
});

test('stop sequences match answer text only and are not emitted', async () => {
  const stream = await client.chat.completions.create({
    model: 'deepseek-v4-flash', messages: USER, stream: true, stop: ['END', 'never'],
    cedar_test_output: 'reasoning mentions END too</think>first part END second part',
  });
  let reasoning = '';
  let content = '';
  let finish = null;
  for await (const ch of stream) {
    reasoning += ch.choices[0].delta.reasoning_content ?? '';
    content += ch.choices[0].delta.content ?? '';
    finish = ch.choices[0].finish_reason ?? finish;
  }
  assert.equal(reasoning, 'reasoning mentions END too');
  assert.equal(content, 'first part ');
  assert.equal(finish, 'stop');
});

test('max_tokens ends with finish_reason length', async () => {
  const r = await client.chat.completions.create({
    model: 'deepseek-v4-flash', messages: USER, max_tokens: 3, thinking: { type: 'disabled' },
    cedar_test_output: 'one two three four five six seven eight nine ten',
  });
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 3);
});

test('models list', async () => {
  const list = await client.models.list();
  const ids = [];
  for await (const m of list) ids.push(m.id);
  assert.deepEqual(ids, ['deepseek-v4-flash']);
});
