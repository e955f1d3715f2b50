// What scripts written for llama-server and the other OpenAI-compatible servers look for:
// /props, /tokenize and /detokenize, /version, /slots, the context length in /v1/models, a
// request id on every response and log line (with the reason of a 4xx), requests without
// "model", the checkpoint's generation_config.json as the default sampling (flags over it), and
// a cancelled request logged with the tokens it ran.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, post, tinyModel } from './helpers.mjs';

let srv, gcDir;
before(async () => {
  // the tiny model with a generation_config.json beside its config.json
  gcDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cedar-gencfg-'));
  for (const f of fs.readdirSync(tinyModel()))
    fs.symlinkSync(path.join(tinyModel(), f), path.join(gcDir, f));
  fs.writeFileSync(path.join(gcDir, 'generation_config.json'),
                   JSON.stringify({ do_sample: true, temperature: 0.6, top_p: 0.9 }));
  srv = await startServer(['--log-format', 'json', '--top-k', '7'], { model: gcDir });
});
after(async () => {
  const { code, signal } = await srv.stop();
  fs.rmSync(gcDir, { recursive: true, force: true });
  assert.equal(signal, null, srv.stderr);
  assert.equal(code, 0, srv.stderr);
});

const get = async (p) => {
  const r = await fetch(srv.url + p);
  return { status: r.status, json: await r.json(), headers: r.headers };
};
const logLines = () => srv.stderr.split('\n').filter((l) => l.startsWith('{'))
  .map((l) => JSON.parse(l)).filter((j) => j.event === 'request');
const settle = () => new Promise((res) => setTimeout(res, 300));

test('/props: the context, the slots and the default sampling (generation_config.json, then flags)', async () => {
  const { status, json } = await get('/props');
  assert.equal(status, 200);
  const p = json.default_generation_settings;
  assert.ok(p.n_ctx > 0);
  assert.equal(p.params.temperature, 0.6);  // generation_config.json
  assert.equal(p.params.top_p, 0.9);
  assert.equal(p.params.top_k, 7);          // --top-k over it
  assert.equal(p.params.source, 'generation_config.json and flags');
  assert.equal(p.params.max_tokens, 32768);
  assert.ok(json.total_slots >= 1);
  assert.equal(json.n_vocab, 129280);
  assert.match(json.build_info, /^\d+\.\d+\.\d+ /);
  const v = await get('/version');
  assert.equal(v.json.version, json.build_info);
  const m = await get('/v1/models');
  assert.equal(m.json.data[0].context_length, p.n_ctx);
  assert.equal(m.json.data[0].meta.n_ctx, p.n_ctx);
});

test('/tokenize and /detokenize round-trip, and refuse what is not a token', async () => {
  const t = await post(srv.url + '/tokenize', { content: 'Hello world', add_special: true });
  assert.equal(t.status, 200, t.text);
  assert.ok(t.json.tokens.length >= 3);
  assert.equal(t.json.tokens[0], 0);  // BOS
  const pieces = await post(srv.url + '/tokenize', { content: 'Hello world', with_pieces: true });
  assert.equal(pieces.json.tokens.map((x) => x.piece).join(''), 'Hello world');
  const d = await post(srv.url + '/detokenize', { tokens: t.json.tokens.slice(1) });
  assert.equal(d.status, 200);
  assert.equal(d.json.content, 'Hello world');
  for (const bad of [{ tokens: [-1] }, { tokens: [1e9] }, { tokens: ['x'] }, { tokens: 3 }]) {
    const r = await post(srv.url + '/detokenize', bad);
    assert.equal(r.status, 400, JSON.stringify(bad));
    assert.equal(r.json.error.param, 'tokens');
  }
  const r = await post(srv.url + '/tokenize', { content: 5 });
  assert.equal(r.status, 400);
});

test('/slots lists every slot', async () => {
  const { json } = await get('/slots');
  assert.ok(Array.isArray(json) && json.length >= 1);
  assert.deepEqual(Object.keys(json[0]).sort(),
                   ['cached_tokens', 'id', 'is_processing', 'n_ctx', 'prompt_tokens', 'state']);
});

test('"model" may be left out: the served model answers and is named', async () => {
  const r = await post(srv.url + '/v1/chat/completions',
                       { messages: [{ role: 'user', content: 'hi' }], cedar_test_output: 'ok',
                         thinking: { type: 'disabled' } });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.model, 'deepseek-v4-flash');
  assert.equal(r.json.choices[0].message.content, 'ok');
});

test('every response and log line carries a request id; a 4xx line says why', async () => {
  const a = await post(srv.url + '/v1/chat/completions', { model: 'm', messages: [], });
  assert.equal(a.status, 400);
  const id = a.headers.get('x-request-id');
  assert.match(id, /^req_[0-9a-f]{24}$/);
  const given = await post(srv.url + '/tokenize', { content: 'x' }, { 'x-request-id': 'trace-42' });
  assert.equal(given.headers.get('x-request-id'), 'trace-42');
  const odd = await post(srv.url + '/tokenize', { content: 'x' }, { 'x-request-id': 'a"b' });
  assert.match(odd.headers.get('x-request-id'), /^req_/);
  const h = await fetch(srv.url + '/health');
  assert.match(h.headers.get('x-request-id'), /^req_/);
  await settle();
  const line = logLines().find((j) => j.request_id === id);
  assert.ok(line, srv.stderr);
  assert.equal(line.status, 400);
  assert.match(line.error, /messages must be a non-empty array/);
  assert.ok(logLines().some((j) => j.request_id === 'trace-42'));
});

test('a client that leaves mid-answer is logged with the tokens its request ran', async () => {
  const ctl = new AbortController();
  const res = await fetch(srv.url + '/v1/chat/completions', {
    method: 'POST', signal: ctl.signal,
    headers: { 'content-type': 'application/json', 'x-request-id': 'leaver-1' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], stream: true,
                           max_tokens: 100000, temperature: 0.9 }),
  });
  const reader = res.body.getReader();
  let seen = '';
  while ((seen.match(/"delta"/g) ?? []).length < 8) {
    const { value, done } = await reader.read();
    if (done) break;
    seen += Buffer.from(value).toString();
  }
  ctl.abort();
  let line;
  for (let i = 0; i < 50 && !line; ++i) {
    await settle();
    line = logLines().find((j) => j.request_id === 'leaver-1');
  }
  assert.ok(line, srv.stderr);
  assert.equal(line.finish, 'client-gone');
  assert.ok(line.completion_tokens >= 7, JSON.stringify(line));
  assert.ok(line.prompt_tokens > 0, JSON.stringify(line));
});
