// Inputs that used to exhaust or stall the server (issue 46): bodies of many object keys (parsed
// in quadratic time), a 4 MiB model name echoed into every chunk, out-of-range schema counts, a
// stderr nobody reads, and start-up flags that aborted or misled.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import { BIN, tinyModel, startServer, post } from './helpers.mjs';

let srv;
before(async () => { srv = await startServer(['--parallel', '2']); });
after(async () => {
  const { code, signal } = await srv.stop();
  assert.equal(signal, null, srv.stderr);
  assert.equal(code, 0, srv.stderr);
});

const CHAT = { model: 'm', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] };

function countBody(metadata) {
  return JSON.stringify({ model: 'm', max_tokens: 1, messages: [{ role: 'user', content: 'hi' }], metadata });
}
function manyKeys(n) {
  const o = {};
  for (let i = 0; i < n; i++) o['k' + i] = 1;
  return o;
}
async function timed(body) {
  const t0 = performance.now();
  const r = await post(srv.url + '/v1/messages/count_tokens', body);
  return { ms: performance.now() - t0, r };
}

test('objects of 100,000 keys are refused in time linear in the body, naming the object', async () => {
  const keys = countBody(manyKeys(100000));        // 1.1 MB: took 13 s of CPU before
  const flat = countBody({ x: 'v'.repeat(keys.length) });  // the same size, one key
  let bestKeys = Infinity, bestFlat = Infinity;  // the best of 3: what the work costs, less noise
  for (let round = 0; round < 3; round++) {
    const a = await timed(keys), b = await timed(flat);
    assert.equal(a.r.status, 400);
    assert.match(a.r.json.error.message, /a JSON object in `metadata` has more than 1024 keys/);
    assert.equal(b.r.status, 200, b.r.text);
    bestKeys = Math.min(bestKeys, a.ms);
    bestFlat = Math.min(bestFlat, b.ms);
  }
  // the refusal reads the body once, like any other body of its size (measured: 0.1-0.3x)
  const ratio = bestKeys / Math.max(bestFlat, 5);
  assert.ok(ratio < 4, `key-count body took ${ratio.toFixed(1)}x a same-size body`);
  // five at once leave /health answering
  const five = Array.from({ length: 5 }, () => post(srv.url + '/v1/messages/count_tokens', countBody(manyKeys(200000))));
  const health = await fetch(srv.url + '/health');
  assert.equal(health.status, 200);
  for (const r of await Promise.all(five)) assert.equal(r.status, 400);
});

test('a model name longer than 256 bytes is a 400, not echoed into every chunk', async () => {
  const r = await post(srv.url + '/v1/chat/completions', { ...CHAT, stream: true, model: 'm'.repeat(4 << 20) });
  assert.equal(r.status, 400);
  assert.match(r.json.error.message, /model is 4194304 bytes long; at most 256/);
  assert.ok(r.text.length < 1000);
  const ok = await post(srv.url + '/v1/chat/completions', { ...CHAT, model: 'm'.repeat(256) });
  assert.equal(ok.status, 200);
  assert.equal(ok.json.model, 'm'.repeat(256));
  const a = await post(srv.url + '/v1/messages', { ...CHAT, model: 'x'.repeat(300) });
  assert.equal(a.status, 400);
});

test('schema counts out of range are 400s', async () => {
  for (const items of [{ minItems: 2 ** 63 }, { maxItems: -1 }, { minItems: 1.5 }, { minItems: 'many' }]) {
    const r = await post(srv.url + '/v1/chat/completions', {
      ...CHAT,
      response_format: { type: 'json_schema',
                         json_schema: { name: 'x', schema: { type: 'array', items: { type: 'integer' }, ...items } } },
    });
    assert.equal(r.status, 400, JSON.stringify(items) + ' ' + r.text);
  }
  const s = await post(srv.url + '/v1/chat/completions', {
    ...CHAT,
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', maxLength: -3 } } },
  });
  assert.equal(s.status, 400);
});

// cedar serve with its stderr on a FIFO that is held open and never read: the pipe fills after
// ~64 KB of log.
test('a stderr nobody reads stalls nothing; lines are dropped and counted; SIGTERM still ends it', { timeout: 120000 }, async () => {
  const fifo = path.join(os.tmpdir(), `cedar-stderr-${process.pid}`);
  fs.rmSync(fifo, { force: true });
  execFileSync('mkfifo', [fifo]);
  const reader = fs.openSync(fifo, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  const writer = fs.openSync(fifo, 'w');
  const proc = spawn(BIN, ['serve', '-m', tinyModel(), '--host', '127.0.0.1', '--port', '0', '-t', '2'],
                     { stdio: ['ignore', 'pipe', writer] });
  fs.closeSync(writer);
  try {
    const port = await new Promise((resolve, reject) => {
      let out = '';
      proc.stdout.on('data', (d) => {
        out += d;
        const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
        if (m) resolve(Number(m[1]));
      });
      proc.on('exit', (code) => reject(new Error('exited ' + code)));
    });
    const url = `http://127.0.0.1:${port}`;
    // each request logs a line of ~570 bytes: 1,200 of them fill the pipe and the log's queue
    const path = '/' + 'x'.repeat(500);
    await Promise.all(Array.from({ length: 8 }, async () => {
      for (let i = 0; i < 150; i++) assert.equal((await fetch(url + path)).status, 404);
    }));
    const r = await post(url + '/v1/chat/completions', CHAT);
    assert.equal(r.status, 200);
    const metrics = await (await fetch(url + '/metrics')).text();
    const dropped = Number(metrics.match(/^cedar_log_lines_dropped_total (\d+)$/m)[1]);
    assert.ok(dropped > 0, 'lines were dropped');
    const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
    proc.kill('SIGTERM');
    assert.deepEqual(await exited, { code: 0, signal: null });
  } finally {
    proc.kill('SIGKILL');
    fs.closeSync(reader);
    fs.rmSync(fifo, { force: true });
  }
});

test('flags: threads beyond the CPUs are lowered with a warning, --max-queue 0 still serves', async () => {
  const s = await startServer(['-t', '100000', '--max-queue', '0', '--parallel', '1']);
  try {
    assert.match(s.stderr, /--threads 100000 is more than the \d+ CPUs this process may use; using \d+/);
    assert.equal((await post(s.url + '/v1/chat/completions', CHAT)).status, 200);
  } finally {
    const { code } = await s.stop();
    assert.equal(code, 0);
  }
});

test('flags: a context beyond the model\'s and negative threads are errors that say so', () => {
  const ctx = spawnSync(BIN, ['serve', '-m', tinyModel(), '--port', '0', '-c', String(2 ** 31)], { timeout: 60000 });
  assert.notEqual(ctx.status, 0);
  assert.match(ctx.stderr.toString(), /--ctx-size 2147483648 is more than the model's \d+-token context/);
  const t = spawnSync(BIN, ['run', '-m', tinyModel(), '-t', '-3', '-p', 'x'], { timeout: 60000 });
  assert.notEqual(t.status, 0);
  assert.match(t.stderr.toString(), /--threads must be 0 \(every CPU\) or a positive number, got -3/);
});

test('--request-timeout ends a generation past it as an error that says so', async () => {
  const s = await startServer(['--request-timeout', '1', '--keepalive-ms', '100', '--parallel', '1']);
  try {
    // the tiny model generates a few hundred tokens a second: 100,000 take far longer than 1 s
    const r = await post(s.url + '/v1/chat/completions', { ...CHAT, max_tokens: 100000, stream: true });
    assert.equal(r.status, 200);
    const frames = r.text.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
    const last = frames.at(-1);
    assert.match(last.error?.message ?? '', /ran past the server's deadline of 1 s \(--request-timeout\)/, r.text.slice(-500));
    assert.equal((await post(s.url + '/v1/chat/completions', CHAT)).status, 200);  // the slot is free again
  } finally {
    const { code } = await s.stop();
    assert.equal(code, 0);
  }
});
