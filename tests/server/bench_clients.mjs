#!/usr/bin/env node
// Aggregate decode throughput of `cedar serve` with 1, 4 and 16 concurrent streaming clients
// (a measurement script, not a test: machines differ).
//
//   CEDAR_BIN=build/cedar node tests/server/bench_clients.mjs [--tokens 32] [--threads 2]
//                                                             [--clients 1,4,16] [--model DIR]
//
// Each client streams one chat completion of --tokens tokens (thinking off, EOS suppressed is
// not available, so the usage block's completion_tokens is what counts). Decode rate = tokens
// after each stream's first token / (last stream end - first first-token), i.e. prefill excluded.
import { startServer, tinyModel } from './helpers.mjs';

const arg = (name, def) => {
  const i = process.argv.indexOf('--' + name);
  return i > 0 ? process.argv[i + 1] : def;
};
const TOKENS = Number(arg('tokens', '32'));
const CLIENTS = arg('clients', '1,4,16').split(',').map(Number);
if (arg('model')) process.env.CEDAR_TEST_MODEL = arg('model');
process.env.CEDAR_TEST_THREADS = arg('threads', '2');

async function client(url, i) {
  const t0 = performance.now();
  const res = await fetch(url + '/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'm', stream: true, max_tokens: TOKENS, seed: 1000 + i, temperature: 1,
      thinking: { type: 'disabled' }, messages: [{ role: 'user', content: `bench client ${i}` }],
    }),
  });
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let text = '';
  let first = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += dec.decode(value, { stream: true });
    if (first === null && text.includes('"delta":{"content":"')) first = performance.now();
  }
  const end = performance.now();
  const usage = JSON.parse(text.split('\n\n').filter((f) => f.startsWith('data: {')).at(-1)
                                .slice(6)).usage;
  return { t0, first: first ?? end, end, tokens: usage.completion_tokens };
}

const server = await startServer(['--parallel', String(Math.max(...CLIENTS)), '--no-cache'],
                                 { testHooks: false });
try {
  console.log(`model ${tinyModel()}, ${TOKENS} tokens per client, server threads ` +
              process.env.CEDAR_TEST_THREADS);
  await client(server.url, -1);  // warm-up
  const base = {};
  for (const n of CLIENTS) {
    const runs = await Promise.all(Array.from({ length: n }, (_, i) => client(server.url, i)));
    const firstTok = Math.min(...runs.map((r) => r.first));
    const lastEnd = Math.max(...runs.map((r) => r.end));
    const start = Math.min(...runs.map((r) => r.t0));
    const total = runs.reduce((s, r) => s + r.tokens, 0);
    const decodeTokens = runs.reduce((s, r) => s + Math.max(0, r.tokens - 1), 0);
    const rate = decodeTokens / ((lastEnd - firstTok) / 1000);
    base[n] = rate;
    console.log(`${String(n).padStart(2)} clients: ${total} tokens in ` +
                `${((lastEnd - start) / 1000).toFixed(2)} s, aggregate decode ` +
                `${rate.toFixed(1)} tok/s (x${(rate / base[CLIENTS[0]]).toFixed(2)} vs ` +
                `${CLIENTS[0]} client), per client ${(rate / n).toFixed(1)} tok/s`);
  }
} finally {
  await server.stop();
}
