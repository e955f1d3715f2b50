// Malformed requests get the OpenAI (or Anthropic) error body with the right 4xx status and a
// message that says what is wrong (v41-interface.md §5.8); the server keeps serving. Also: API
// keys, the body size limit, the context limit, unknown routes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startServer, post } from './helpers.mjs';

let open;    // no key, 64 KiB body limit
let locked;  // --api-key secret, 64-token context
before(async () => {
  open = await startServer(['--max-body', '65536']);
  locked = await startServer(['--api-key', 'secret', '--ctx-size', '64']);
});
after(async () => {
  for (const s of [open, locked]) {
    const { code, signal } = await s.stop();
    assert.equal(signal, null, s.stderr);
    assert.equal(code, 0, s.stderr);
  }
});

const OK = { model: 'm', messages: [{ role: 'user', content: 'hi' }], cedar_test_output: 'ok' };

function isOpenAIError(r, status, pattern) {
  assert.equal(r.status, status, r.text);
  assert.ok(r.json?.error, 'OpenAI error body: ' + r.text);
  assert.equal(typeof r.json.error.message, 'string');
  assert.equal(typeof r.json.error.type, 'string');
  assert.ok('param' in r.json.error && 'code' in r.json.error);
  if (pattern) assert.match(r.json.error.message, pattern);
}

test('bad JSON, empty and non-object bodies', async () => {
  const u = open.url + '/v1/chat/completions';
  isOpenAIError(await post(u, '{"model": "m", "messages": ['), 400, /Invalid JSON/);
  isOpenAIError(await post(u, ''), 400, /empty/);
  isOpenAIError(await post(u, '[1, 2]'), 400, /JSON object/);
  const badUtf8 = Buffer.concat([Buffer.from('{"model": "m", "x": "'), Buffer.from([0xff]),
                                 Buffer.from('"}')]);
  isOpenAIError(await post(u, badUtf8), 400, /Invalid JSON/);
});

test('wrong types and out-of-range values name the field', async () => {
  const u = open.url + '/v1/chat/completions';
  const cases = [
    [{ ...OK, temperature: 'hot' }, /temperature must be a number/, 'temperature'],
    [{ ...OK, temperature: 3 }, /temperature must be in \[0, 2\]/, 'temperature'],
    [{ ...OK, max_tokens: 0 }, /max_tokens must be greater than zero/, 'max_tokens'],
    [{ ...OK, max_tokens: 1.5 }, /max_tokens must be an integer/, 'max_tokens'],
    [{ ...OK, n: 2 }, /only n = 1/, 'n'],
    [{ ...OK, stream_options: { include_usage: true } }, /stream_options should be set along with stream = true/, 'stream_options'],
    [{ ...OK, stop: Array(17).fill('x') }, /string array too long: 17/, 'stop'],
    [{ ...OK, frequency_penalty: 5 }, /frequency_penalty must be in \[-2, 2\]/, 'frequency_penalty'],
    [{ ...OK, reasoning_effort: 'extreme' }, /reasoning_effort/, 'reasoning_effort'],
    [{ ...OK, messages: 'hi' }, /messages must be a non-empty array/, 'messages'],
    [{ ...OK, messages: [] }, /messages must be a non-empty array/, 'messages'],
    [{ ...OK, messages: [{ role: 'robot', content: 'x' }] }, /role/, null],
    [{ model: 'm', messages: OK.messages, stream: 'yes' }, /stream must be a boolean/, 'stream'],
    [{ model: '', messages: OK.messages }, /model must be a non-empty string/, 'model'],
    [{ model: 7, messages: OK.messages }, /model must be a non-empty string/, 'model'],
    [{ ...OK, tools: [{ type: 'function', function: { name: 'a' } },
                      { type: 'function', function: { name: 'a' } }] }, /Tool names must be unique/, null],
    [{ ...OK, tool_choice: 'required', tools: [{ type: 'function', function: { name: 'a' } }] },
     /Thinking mode does not support this tool_choice/, 'tool_choice'],
  ];
  for (const [body, pattern, param] of cases) {
    const r = await post(u, body);
    isOpenAIError(r, 400, pattern);
    assert.equal(r.json.error.type, 'invalid_request_error');
    if (param) assert.equal(r.json.error.param, param, JSON.stringify(body));
  }
});

test('the official client raises BadRequestError with the message', async () => {
  const client = new OpenAI({ baseURL: open.url + '/v1', apiKey: 'x', maxRetries: 0 });
  await assert.rejects(
    client.chat.completions.create({ ...OK, temperature: 9 }),
    (e) => e instanceof OpenAI.BadRequestError && /temperature must be in \[0, 2\]/.test(e.message));
  await assert.rejects(client.completions.create({ model: 'm', prompt: 42 }),
                       (e) => e.status === 400 && /prompt must be a string/.test(e.message));
});

test('unknown routes: 404, a known route with the wrong method: 405, both with error bodies', async () => {
  isOpenAIError(await post(open.url + '/v1/nope', OK), 404, /Not found/);
  const r = await fetch(open.url + '/v1/chat/completions');  // GET
  assert.equal(r.status, 405);
  assert.equal(r.headers.get('allow'), 'POST');
  assert.match((await r.json()).error.message, /Method not allowed: GET/);
  const a = await post(open.url + '/anthropic/v1/nope', {});
  assert.equal(a.status, 404);
  assert.equal(a.json.type, 'error');
  assert.equal(a.json.error.type, 'not_found_error');
});

test('a body over --max-body is a 413', async () => {
  const big = { ...OK, messages: [{ role: 'user', content: 'x'.repeat(200000) }] };
  let r;
  try {
    r = await post(open.url + '/v1/chat/completions', big);
  } catch (e) {
    // The server may close the socket before the client has sent everything.
    r = null;
  }
  if (r) isOpenAIError(r, 413, /too large/);
  // ...and keeps serving.
  assert.equal((await post(open.url + '/v1/chat/completions', OK)).status, 200);
});

test('API key: 401 without or with a wrong key; Bearer and x-api-key accepted', async () => {
  const u = locked.url + '/v1/chat/completions';
  isOpenAIError(await post(u, OK), 401, /API key/);
  isOpenAIError(await post(u, OK, { authorization: 'Bearer wrong' }), 401);
  assert.equal((await post(u, OK, { authorization: 'Bearer secret' })).status, 200);
  assert.equal((await post(u, OK, { 'x-api-key': 'secret' })).status, 200);
  assert.equal((await fetch(locked.url + '/health')).status, 200, 'health needs no key');

  const bad = new OpenAI({ baseURL: locked.url + '/v1', apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError);
  const good = new Anthropic({ baseURL: locked.url + '/anthropic', apiKey: 'secret', maxRetries: 0 });
  const m = await good.messages.create({ model: 'deepseek-v4-flash', max_tokens: 4,
    thinking: { type: 'disabled' }, messages: [{ role: 'user', content: 'hi' }],
    cedar_test_output: 'yo' });
  assert.equal(m.content[0].text, 'yo');
  const anon = new Anthropic({ baseURL: locked.url + '/anthropic', apiKey: 'nope', maxRetries: 0 });
  await assert.rejects(
    anon.messages.create({ model: 'x', max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] }),
    (e) => e.status === 401 && e.error?.error?.type === 'authentication_error');
});

test('a prompt that does not fit the context is a 400 naming the limit', async () => {
  const r = await post(locked.url + '/v1/chat/completions',
                       { ...OK, messages: [{ role: 'user', content: 'word '.repeat(100) }] },
                       { authorization: 'Bearer secret' });
  isOpenAIError(r, 400, /maximum context length is 64 tokens/);
});

test('after all that the server still answers', async () => {
  const r = await post(open.url + '/v1/chat/completions', OK);
  assert.equal(r.status, 200);
  assert.equal(r.json.choices[0].message.reasoning_content, 'ok');
  const h = await fetch(open.url + '/health');
  assert.equal((await h.json()).status, 'ok');
  const metrics = await (await fetch(open.url + '/metrics')).text();
  assert.match(metrics, /cedar_requests_total\{endpoint="chat",status="400"\} \d+/);
  assert.match(metrics, /cedar_completion_tokens_total \d+/);
});
