// KV admission (issue "Beyond RAM"): with `--kv-ram` smaller than every slot's full context the
// server reserves each request's whole sequence (prompt + max_tokens, at most -c) when it is
// submitted and answers 503 with the numbers when it does not fit, never swapping and never
// failing a generation half-way. The pool is sized from `cedar inspect --plan` (the formula the
// server counts with): one full sequence plus a little more than a short request needs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { BIN, tinyModel, startServer } from './helpers.mjs';

const CTX = 1024;
const SHORT = 64;  // prompt + max_tokens of the short request

function planKv(ctx, extra = []) {
  const out = execFileSync(BIN, ['inspect', '--model', tinyModel(), '--plan', '--ctx-size', String(ctx),
                                 '--json', ...extra], { encoding: 'utf8' });
  return JSON.parse(out);
}

const full = planKv(CTX).kv_per_sequence;
const short = planKv(SHORT).kv_per_sequence;
// a full sequence + the short one + half of what a second full one would need beyond it
const POOL = full + short + Math.floor((full - short) / 2);

let server;
before(async () => {
  server = await startServer(['--parallel', '4', '-c', String(CTX), '--kv-ram', String(POOL),
                              '--no-cache']);
});
after(async () => {
  const { code, signal } = await server.stop();
  assert.equal(signal, null, server.stderr);
  assert.equal(code, 0, server.stderr);
});

const chat = (body) => fetch(server.url + '/v1/chat/completions', {
  method: 'POST', headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ model: 'm', thinking: { type: 'disabled' },
                         messages: [{ role: 'user', content: 'hi' }], ...body }),
});

async function health() {
  return (await fetch(server.url + '/health')).json();
}

test('inspect --plan reports a shared pool and refuses one smaller than a sequence', () => {
  const p = planKv(CTX, ['--parallel', '4', '--kv-ram', String(POOL)]);
  assert.equal(p.kv, POOL);
  assert.equal(p.kv_shared, true);
  assert.equal(p.refusal, '');
  const r = spawnSync(BIN, ['inspect', '--model', tinyModel(), '--plan', '--ctx-size', String(CTX),
                            '--parallel', '4', '--kv-ram', String(full - 1)], { encoding: 'utf8' });
  assert.equal(r.status, 1, r.stdout + r.stderr);
  assert.match(r.stdout, /--kv-ram .* cannot hold one sequence of 1024 tokens/);
});

test('a request whose KV does not fit is a 503 naming memory; it is admitted once room is free',
     async () => {
  assert.equal((await health()).kv_pool_bytes, POOL);
  // A: a full-context reservation (no max_tokens), a long forced answer, streamed
  const ac = new AbortController();
  const a = await fetch(server.url + '/v1/chat/completions', {
    method: 'POST', signal: ac.signal, headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'go' }],
                           cedar_test_output: 'word '.repeat(900) }),
  });
  assert.equal(a.status, 200);
  const reader = a.body.getReader();
  await reader.read();
  const during = await health();
  assert.ok(during.kv_reserved_bytes >= full, JSON.stringify(during));

  // B: another full-context request does not fit next to A
  const b = await chat({ cedar_test_output: 'ok' });
  const bText = await b.text();
  assert.equal(b.status, 503, bText);
  assert.ok(b.headers.get('retry-after'), 'a 503 says when to retry');
  const err = JSON.parse(bText).error;
  assert.match(err.message, /^memory: this request needs .* of KV state for 1024 tokens/);
  assert.match(err.message, /KV pool are free/);
  assert.match(err.message, /max_tokens/);
  // the metrics count the pool
  const m = await (await fetch(server.url + '/metrics')).text();
  const pool = m.split('\n').find((l) => l.startsWith('cedar_kv_pool_bytes '));
  assert.ok(Math.abs(Number(pool.split(' ')[1]) - POOL) <= POOL * 1e-5, pool);

  // C: a short request fits beside A and completes
  const c = await chat({ max_tokens: SHORT - 16, cedar_test_output: 'short answer' });
  const cBody = await c.json();
  assert.equal(c.status, 200, JSON.stringify(cBody));
  assert.equal(cBody.choices[0].message.content, 'short answer');

  // A leaves: its reservation goes back (its idle session is dropped when B needs the room)
  ac.abort();
  const t0 = Date.now();
  while ((await health()).active > 0) {
    assert.ok(Date.now() - t0 < 30000, 'the cancelled request ends');
    await new Promise((r) => setTimeout(r, 50));
  }
  const b2 = await chat({ cedar_test_output: 'now it fits' });
  const b2Body = await b2.json();
  assert.equal(b2.status, 200, JSON.stringify(b2Body));
  assert.equal(b2Body.choices[0].message.content, 'now it fits');
  const after = await health();
  assert.ok(after.kv_reserved_bytes <= POOL, JSON.stringify(after));
});

test('streaming clients get the same 503, as JSON, before any event', async () => {
  const ac = new AbortController();
  const a = await fetch(server.url + '/v1/chat/completions', {
    method: 'POST', signal: ac.signal, headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'go' }],
                           cedar_test_output: 'word '.repeat(900) }),
  });
  await a.body.getReader().read();
  const b = await chat({ stream: true, cedar_test_output: 'x' });
  assert.equal(b.status, 503);
  assert.match(b.headers.get('content-type'), /json/);
  assert.match(JSON.parse(await b.text()).error.message, /^memory: /);
  ac.abort();
});
