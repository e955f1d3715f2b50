// The Responses API through the official `openai` client (v41-interface.md §5.6): reasoning and
// text output items, a function-call round trip with function_call_output, streaming events in
// order, and the SDK's responses.stream() accumulator. Structured answers use the test hook.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, dsmlCall } from './helpers.mjs';

let server;
let client;
before(async () => {
  server = await startServer();
  client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'unused', maxRetries: 0,
                        timeout: 300000 });
});
after(async () => {
  const { code, signal } = await server.stop();
  assert.equal(signal, null, server.stderr);
  assert.equal(code, 0, server.stderr);
});

const TOOL = { type: 'function', name: 'lookup', description: 'Look a word up',
               parameters: { type: 'object', properties: { word: { type: 'string' } } } };

test('reasoning + text output, usage with cached and reasoning tokens', async () => {
  const r = await client.responses.create({
    model: 'deepseek-v4-flash', instructions: 'Be brief.', input: 'What is 2+2?',
    reasoning: { effort: 'high' }, cedar_test_output: 'Simple sum.</think>4',
  });
  assert.equal(r.object, 'response');
  assert.equal(r.status, 'completed');
  assert.deepEqual(r.output.map((o) => o.type), ['reasoning', 'message']);
  assert.equal(r.output[0].content[0].type, 'reasoning_text');
  assert.equal(r.output[0].content[0].text, 'Simple sum.');
  assert.equal(r.output_text, '4');  // computed by the SDK from the message item
  assert.ok(r.usage.output_tokens_details.reasoning_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  assert.equal(typeof r.usage.input_tokens_details.cached_tokens, 'number');
});

test('reasoning effort none: no reasoning item; max_output_tokens -> incomplete', async () => {
  const r = await client.responses.create({
    model: 'deepseek-v4-flash', input: 'Count.', reasoning: { effort: 'none' },
    max_output_tokens: 2, cedar_test_output: 'one two three four five',
  });
  assert.equal(r.status, 'incomplete');
  assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  assert.deepEqual(r.output.map((o) => o.type), ['message']);
  assert.equal(r.output[0].status, 'incomplete');
});

// A call the output limit cuts short is marked incomplete, in the body and in the stream, so that
// no client runs half a call; a call closed before the limit stays completed.
test('a tool call cut by max_output_tokens is incomplete', async () => {
  const value = 'an evergreen conifer of the genus Cedrus, with fragrant wood and needles';
  const answer = 'Use the tool.</think>' + dsmlCall('lookup', { word: 'cedar' }) +
                 dsmlCall('lookup', { word: value });
  const ask = (max, stream, text = answer) => client.responses.create({
    model: 'deepseek-v4-flash', input: 'Define.', tools: [TOOL], cedar_test_output: text,
    ...(max ? { max_output_tokens: max } : {}), ...(stream ? { stream } : {}),
  });
  const whole = await ask(0, false);
  assert.equal(whole.status, 'completed');
  const calls = (r) => r.output.filter((o) => o.type === 'function_call');
  assert.deepEqual(calls(whole).map((c) => c.status), ['completed', 'completed']);
  // The limit: as many tokens as the answer up to the middle of the second call's value.
  const half = await ask(0, false, answer.slice(0, answer.length - value.length / 2));
  const limit = half.usage.output_tokens;
  const cut = await ask(limit, false);
  assert.equal(cut.status, 'incomplete');
  assert.deepEqual(calls(cut).map((c) => c.status), ['completed', 'incomplete']);
  let done = null;
  const items = [];
  for await (const e of await ask(limit, true)) {
    if (e.type === 'response.output_item.done' && e.item.type === 'function_call') items.push(e.item);
    if (e.type === 'response.incomplete') done = e.response;
  }
  assert.deepEqual(items.map((c) => c.status), ['completed', 'incomplete']);
  assert.deepEqual(calls(done).map((c) => c.status), ['completed', 'incomplete']);
});

test('function call round trip (not streamed)', async () => {
  const input = [{ role: 'user', content: 'Define "cedar".' }];
  const r1 = await client.responses.create({
    model: 'deepseek-v4-flash', input, tools: [TOOL],
    cedar_test_output: 'Use the tool.</think>' + dsmlCall('lookup', { word: 'cedar' }),
  });
  const fc = r1.output.find((o) => o.type === 'function_call');
  assert.ok(fc, JSON.stringify(r1.output));
  assert.equal(fc.name, 'lookup');
  assert.deepEqual(JSON.parse(fc.arguments), { word: 'cedar' });
  const r2 = await client.responses.create({
    model: 'deepseek-v4-flash', tools: [TOOL],
    input: [...input, ...r1.output,
            { type: 'function_call_output', call_id: fc.call_id, output: 'a conifer' }],
    cedar_test_output: 'Got it.</think>A cedar is a conifer.',
  });
  assert.equal(r2.output_text, 'A cedar is a conifer.');
  assert.ok(r2.usage.input_tokens > r1.usage.input_tokens);
});

test('streaming events in order (raw iteration)', async () => {
  const stream = await client.responses.create({
    model: 'deepseek-v4-flash', input: 'hi', tools: [TOOL], stream: true,
    cedar_test_output: 'think</think>text' + dsmlCall('lookup', { word: 'x' }),
  });
  const types = [];
  let seq = -1;
  for await (const ev of stream) {
    types.push(ev.type);
    assert.equal(ev.sequence_number, seq + 1, 'sequence numbers increase by one');
    seq = ev.sequence_number;
  }
  const compact = types.filter((t) => !t.endsWith('.delta'));
  assert.deepEqual(compact, [
    'response.created', 'response.in_progress',
    'response.output_item.added', 'response.content_part.added',  // reasoning
    'response.reasoning_text.done', 'response.content_part.done', 'response.output_item.done',
    'response.output_item.added', 'response.content_part.added',  // message
    'response.output_text.done', 'response.content_part.done', 'response.output_item.done',
    'response.output_item.added',                                  // function call
    'response.function_call_arguments.done', 'response.output_item.done',
    'response.completed',
  ]);
  assert.ok(types.includes('response.reasoning_text.delta'));
  assert.ok(types.includes('response.output_text.delta'));
  assert.ok(types.includes('response.function_call_arguments.delta'));
});

test('responses.stream() accumulates the final response', async () => {
  const stream = client.responses.stream({
    model: 'deepseek-v4-flash', input: 'hi', cedar_test_output: 'mull</think>Hello you',
  });
  let deltas = '';
  stream.on('response.output_text.delta', (e) => { deltas += e.delta; });
  const final = await stream.finalResponse();
  assert.equal(deltas, 'Hello you');
  // (finalResponse() of this SDK version fills output_text only for parseable formats.)
  assert.deepEqual(final.output.map((o) => o.type), ['reasoning', 'message']);
  assert.equal(final.output[0].content[0].text, 'mull');
  assert.equal(final.output[1].content[0].text, 'Hello you');
  assert.equal(final.status, 'completed');
});

test('previous_response_id is refused with a clear message', async () => {
  await assert.rejects(
    client.responses.create({ model: 'm', input: 'x', previous_response_id: 'resp_1' }),
    (e) => e.status === 400 && /previous_response_id/.test(e.message));
});

// Codex's thread-title request: a strict json_schema with string lengths in text.format. Random
// weights under the constraint: every complete answer is a title of 1..36 characters.
test('text.format json_schema with string bounds (Codex thread titles)', async () => {
  const format = { type: 'json_schema', name: 'codex_output_schema', strict: true,
    schema: { type: 'object', properties: { title: { type: 'string', minLength: 1, maxLength: 36 } },
              required: ['title'], additionalProperties: false } };
  let complete = 0;
  for (let seed = 1; seed <= 4; seed++) {
    const r = await client.responses.create({
      model: 'deepseek-v4-flash', input: 'Name this thread.', reasoning: { effort: 'none' },
      text: { format }, max_output_tokens: 64, temperature: 1, top_p: 1, seed,
    });
    if (r.status !== 'completed') continue;
    complete++;
    const v = JSON.parse(r.output_text);
    assert.deepEqual(Object.keys(v), ['title']);
    assert.ok([...v.title].length >= 1 && [...v.title].length <= 36, v.title);
  }
  console.log(`[ info ] thread titles: ${complete} of 4 complete within 64 tokens`);
});

// A custom tool with a regex format: the call's input is held to the whole pattern while decoding.
// Random weights finish their calls within 96 tokens for about 4 seeds in 10 (the rest keep calling),
// so the test walks fixed seeds until two answers complete: a miss is then ~1e-4, not ~1e-1.
test('custom tool with a regex format: the input matches it', async () => {
  const tools = [{ type: 'custom', name: 'set_code', description: 'Set the code',
                   format: { type: 'grammar', syntax: 'regex', definition: '[a-z]{3}-[0-9]{2}' } }];
  let complete = 0;
  let checked = 0;
  for (let seed = 1; seed <= 16 && complete < 2; seed++) {
    const r = await client.responses.create({
      model: 'deepseek-v4-flash', input: 'Set the code.', reasoning: { effort: 'none' }, tools,
      tool_choice: { type: 'custom', name: 'set_code' }, max_output_tokens: 96, seed,
    });
    const calls = r.output.filter((o) => o.type === 'custom_tool_call');
    // Every call the answer closed is held to the pattern, complete answer or not; the one the
    // limit cut short is marked incomplete.
    for (const c of calls.filter((c) => c.status === 'completed')) {
      assert.match(c.input, /^[a-z]{3}-[0-9]{2}$/);
      checked++;
    }
    if (r.status !== 'completed') continue;
    complete++;
    assert.ok(calls.length > 0, JSON.stringify(r.output));
  }
  assert.ok(checked > 0, 'no call was closed');
  assert.ok(complete > 0, 'no answer completed its calls within 96 tokens');
});
