// Structured output is enforced, not only prompted: with response_format json_object or
// json_schema the tiny model's random weights still write JSON -- a complete answer parses (and
// validates against the schema); one cut by max_tokens is a prefix of such a text (checked in
// tests/unit/runtime/token_constraint_test.cpp). Also through the official client and the
// Responses API, with schemas as Pydantic and zod-to-json-schema write them (validated by ajv),
// and a schema the constraint cannot enforce is a 400 naming what.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import OpenAI from 'openai';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
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

// tests/schema_suite/realistic.json: a Pydantic v2 model ($defs, $ref, anyOf with null, enum,
// pattern, email, date-time, nested arrays), a recursive zod-to-json-schema output (definitions,
// uuid, uri, exclusiveMinimum), a Pydantic discriminated union (oneOf + discriminator) and maps /
// tuples (additionalProperties, prefixItems, patternProperties, propertyNames).
const REALISTIC = JSON.parse(fs.readFileSync(new URL('../schema_suite/realistic.json', import.meta.url)));
const ajv = new Ajv2020({ strict: false, logger: false });
addFormats(ajv, ['date', 'time', 'date-time', 'email', 'hostname', 'ipv4', 'ipv6', 'uuid', 'uri']);

test('json_schema as Pydantic and zod write them: every complete answer validates (ajv)', async () => {
  let complete = 0, total = 0;
  for (const i of [0, 1, 3, 6]) {
    const { $schema, ...schema } = REALISTIC[i].schema;
    const validate = ajv.compile(schema);
    for (let seed = 1; seed <= 3; seed++) {
      const r = await client.chat.completions.create({
        model: 'm', messages: ASK, seed, max_tokens: 200, thinking: { type: 'disabled' },
        response_format: { type: 'json_schema', json_schema: { name: 's', strict: true, schema: REALISTIC[i].schema } },
      });
      const c = r.choices[0];
      total++;
      assert.match(c.message.content, /^\s*\{/, c.message.content);
      if (c.finish_reason !== 'stop') continue;
      complete++;
      const v = JSON.parse(c.message.content);
      assert.ok(validate(v), `${REALISTIC[i].description}: ${c.message.content}: ${JSON.stringify(validate.errors)}`);
    }
  }
  console.log(`[ info ] realistic schemas: ${complete} of ${total} answers complete within 200 tokens`);
  assert.ok(complete >= 1, 'no answer completed');
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
      type: 'object', properties: { a: { type: 'string', not: { pattern: '^x' } } } } } },
  });
  assert.equal(r.status, 400, r.text);
  assert.match(r.json.error.message, /"not" is not supported/);
  assert.match(r.json.error.param, /response_format\.json_schema\.schema\.properties\.a/);
});

// Strict tool calls: the calls block is constrained to the declared tools, each parameter at
// most once, the required ones present, values of their schema.
const ALARM = {
  type: 'function',
  function: {
    name: 'set_alarm', strict: true,
    parameters: {
      type: 'object', required: ['hour'],
      properties: { hour: { type: 'integer' }, loud: { type: 'boolean' },
        days: { type: 'array', items: { enum: [1, 2, 3] }, maxItems: 3 } },
    },
  },
};
const STOP = { type: 'function', function: { name: 'stop', strict: true, parameters: { type: 'object', properties: {} } } };
const CALL_ASK = [{ role: 'user', content: 'Wake me at seven.' }];

function validCall(name, args) {
  if (name === 'stop') return Object.keys(args).length === 0;
  if (name !== 'set_alarm' || !Number.isInteger(args.hour)) return false;
  if ('loud' in args && typeof args.loud !== 'boolean') return false;
  if ('days' in args && !(Array.isArray(args.days) && args.days.length <= 3 &&
      args.days.every((d) => [1, 2, 3].includes(d)))) return false;
  return Object.keys(args).every((k) => ['hour', 'loud', 'days'].includes(k));
}

test('tool_choice required: random weights write only calls of the declared tools, streamed too', async () => {
  const body0 = {
    model: 'm', messages: CALL_ASK, max_tokens: 96, thinking: { type: 'disabled' },
    tools: [ALARM, STOP], tool_choice: 'required',
  };
  // A cold CED prefill and one restored from the prefix cache may differ in the last digits of
  // the logits (docs/RUNNING.md): one request first, so that every compared pair is restored.
  await client.chat.completions.create({ ...body0, max_tokens: 1 });
  let complete = 0;
  for (let seed = 1; seed <= 6; seed++) {
    const body = { ...body0, seed };
    const r = await client.chat.completions.create(body);
    const c = r.choices[0];
    if (c.finish_reason === 'tool_calls') {
      complete++;
      assert.ok(c.message.tool_calls.length >= 1);
      for (const t of c.message.tool_calls)
        assert.ok(validCall(t.function.name, JSON.parse(t.function.arguments)), JSON.stringify(t));
    } else {
      assert.equal(c.finish_reason, 'length', JSON.stringify(c));
    }
    const s = await client.chat.completions.create({ ...body, stream: true });
    const args = {};
    for await (const ch of s)
      for (const t of ch.choices[0]?.delta?.tool_calls ?? []) args[t.index] = (args[t.index] ?? '') + (t.function?.arguments ?? '');
    if (c.finish_reason === 'tool_calls')
      assert.deepEqual(Object.values(args), c.message.tool_calls.map((t) => t.function.arguments));
  }
  assert.ok(complete >= 1, 'no answer completed its calls within 96 tokens');
  console.log(`[ info ] tool_choice required: ${complete} of 6 answers complete within 96 tokens`);
});

test('a named tool_choice calls that tool only; Anthropic tool_choice tool as well', async () => {
  let complete = 0;
  for (let seed = 1; seed <= 6; seed++) {
    const r = await client.chat.completions.create({
      model: 'm', messages: CALL_ASK, seed, max_tokens: 160, thinking: { type: 'disabled' },
      tools: [ALARM, STOP], tool_choice: { type: 'function', function: { name: 'set_alarm' } },
    });
    if (r.choices[0].finish_reason === 'tool_calls') {  // else cut: a prefix (unit tests)
      complete++;
      for (const t of r.choices[0].message.tool_calls) {
        assert.equal(t.function.name, 'set_alarm');
        assert.ok(validCall('set_alarm', JSON.parse(t.function.arguments)), t.function.arguments);
      }
    }
    if (seed > 3) continue;
    const a = await post(srv.url + '/v1/messages', {
      model: 'm', max_tokens: 96, messages: CALL_ASK, metadata: {}, thinking: { type: 'disabled' },
      tools: [{ name: 'set_alarm', strict: true, input_schema: ALARM.function.parameters }],
      tool_choice: { type: 'tool', name: 'set_alarm' },
    });
    assert.equal(a.status, 200, a.text);
    if (a.json.stop_reason !== 'tool_use') continue;
    for (const b of a.json.content.filter((x) => x.type === 'tool_use')) {
      assert.equal(b.name, 'set_alarm');
      assert.ok(validCall('set_alarm', b.input), JSON.stringify(b.input));
    }
  }
  assert.ok(complete >= 1, 'no named call completed within 160 tokens');
});

test('tool_choice auto with a strict tool: free text, and any call is valid', async () => {
  for (let seed = 1; seed <= 3; seed++) {
    const r = await client.chat.completions.create({
      model: 'm', messages: CALL_ASK, seed, max_tokens: 48, thinking: { type: 'disabled' },
      tools: [ALARM, STOP],
    });
    const c = r.choices[0];
    assert.ok(['stop', 'length', 'tool_calls'].includes(c.finish_reason));
    for (const t of c.message.tool_calls ?? [])
      assert.ok(validCall(t.function.name, JSON.parse(t.function.arguments)), JSON.stringify(t));
  }
});

test('strict tools with bounds, $ref and anyOf (a 400 before): calls validate (ajv)', async () => {
  const parameters = {
    type: 'object', additionalProperties: false, required: ['hour', 'when'],
    $defs: { day: { enum: ['mon', 'tue', 'wed'] } },
    properties: {
      hour: { type: 'integer', minimum: 0, maximum: 23 },
      when: { anyOf: [{ $ref: '#/$defs/day' }, { type: 'array', items: { $ref: '#/$defs/day' }, maxItems: 2 }] },
    },
  };
  const validate = ajv.compile(parameters);
  let complete = 0;
  for (let seed = 1; seed <= 4; seed++) {
    const r = await post(srv.url + '/v1/chat/completions', {
      model: 'm', messages: CALL_ASK, seed, max_tokens: 128, thinking: { type: 'disabled' },
      tools: [{ type: 'function', function: { name: 'wake', strict: true, parameters } }], tool_choice: 'required',
    });
    assert.equal(r.status, 200, r.text);
    const c = r.json.choices[0];
    if (c.finish_reason !== 'tool_calls') continue;
    complete++;
    for (const t of c.message.tool_calls) {
      const args = JSON.parse(t.function.arguments);
      assert.ok(validate(args), `${t.function.arguments}: ${JSON.stringify(validate.errors)}`);
    }
  }
  console.log(`[ info ] strict tool with bounds: ${complete} of 4 calls complete within 128 tokens`);
});

test('a strict tool whose schema cannot be enforced is a 400 naming the parameter', async () => {
  const r = await post(srv.url + '/v1/chat/completions', {
    model: 'm', messages: CALL_ASK,
    tools: [{ type: 'function', function: { name: 'f', strict: true, parameters: {
      type: 'object', properties: { a: { type: 'integer', not: { minimum: 3 } } } } } }],
  });
  assert.equal(r.status, 400, r.text);
  assert.match(r.json.error.param, /tools\[0\]\.function\.parameters\.properties\.a/);
});
