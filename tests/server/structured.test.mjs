// Structured output is enforced, not only prompted: with response_format json_object or
// json_schema the tiny model's random weights still write JSON -- a complete answer parses (and
// validates against the schema); one cut by max_tokens is a prefix of such a text (checked in
// tests/unit/runtime/json_constraint_test.cpp). Also through the official client and the
// Responses API, and a schema the constraint cannot enforce is a 400 naming what.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, post } from './helpers.mjs';

let srv, client;
before(async () => {
  srv = await startServer([]);
  client = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'x', maxRetries: 0 });
});
after(async () => {
  const { code, signal } = await srv.stop();
  assert.equal(signal, null, srv.stderr);
  assert.equal(code, 0, srv.stderr);
});

const ASK = [{ role: 'user', content: 'Answer in JSON.' }];
const RECORD = {
  type: 'object', additionalProperties: false, required: ['ok', 'color'],
  properties: { ok: { type: 'boolean' }, color: { enum: ['red', 'green'] }, n: { type: 'integer' } },
};

function validRecord(v) {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  if (typeof v.ok !== 'boolean' || !['red', 'green'].includes(v.color)) return false;
  if ('n' in v && !Number.isInteger(v.n)) return false;
  return Object.keys(v).every((k) => ['ok', 'color', 'n'].includes(k));
}

test('json_object: every complete answer of random weights is a JSON object', async () => {
  let complete = 0;
  for (let seed = 1; seed <= 6; seed++) {
    const r = await client.chat.completions.create({
      model: 'm', messages: ASK, seed, max_tokens: 48, thinking: { type: 'disabled' },
      response_format: { type: 'json_object' },
    });
    const c = r.choices[0];
    assert.match(c.message.content, /^\s*\{/, c.message.content);
    if (c.finish_reason !== 'stop') continue;
    complete++;
    const v = JSON.parse(c.message.content);
    assert.equal(typeof v, 'object');
    assert.ok(!Array.isArray(v));
  }
  console.log(`[ info ] json_object: ${complete} of 6 answers complete within 48 tokens`);
});

test('json_schema (strict): complete answers validate, streamed too', async () => {
  let complete = 0;
  for (let seed = 1; seed <= 6; seed++) {
    const body = {
      model: 'm', messages: ASK, seed, max_tokens: 64, thinking: { type: 'disabled' },
      response_format: { type: 'json_schema', json_schema: { name: 'rec', strict: true, schema: RECORD } },
    };
    const r = await client.chat.completions.create(body);
    const c = r.choices[0];
    if (c.finish_reason === 'stop') {
      complete++;
      assert.ok(validRecord(JSON.parse(c.message.content)), c.message.content);
    }
    // the same request streamed gives the same text (greedy is not needed: same seed)
    const s = await client.chat.completions.create({ ...body, stream: true });
    let text = '';
    for await (const ch of s) text += ch.choices[0]?.delta?.content ?? '';
    assert.equal(text, c.message.content);
  }
  console.log(`[ info ] json_schema: ${complete} of 6 answers complete within 64 tokens`);
});

test('the Responses API text.format json_schema is enforced too', async () => {
  const r = await post(srv.url + '/v1/responses', {
    model: 'm', input: 'Answer in JSON.', max_output_tokens: 64, reasoning: { effort: 'none' },
    text: { format: { type: 'json_schema', name: 'rec', strict: true, schema: RECORD } },
  });
  assert.equal(r.status, 200, r.text);
  const msg = r.json.output.find((o) => o.type === 'message');
  const text = msg.content[0].text;
  assert.match(text, /^\s*\{/, text);
  if (r.json.status === 'completed') assert.ok(validRecord(JSON.parse(text)), text);
});

test('a schema the constraint cannot enforce is a 400 that names the feature', async () => {
  const r = await post(srv.url + '/v1/chat/completions', {
    model: 'm', messages: ASK,
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: {
      type: 'object', properties: { a: { type: 'string', pattern: '^x' } } } } },
  });
  assert.equal(r.status, 400, r.text);
  assert.match(r.json.error.message, /"pattern" is not supported/);
  assert.match(r.json.error.param, /response_format\.json_schema\.schema\.properties\.a/);
});
