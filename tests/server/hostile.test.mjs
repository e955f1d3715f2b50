// Requests that used to crash, starve or mislead the server (issue 10): deep JSON, chunked
// bodies past --max-body, out-of-range numbers, form-encoded JSON (now a 415), images, a port in use,
// clients that leave a non-streaming request, slow-header clients. After each the server is
// alive and answers valid requests.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { spawn } from 'node:child_process';
import { BIN, tinyModel, startServer, post, slowHeaderClients } from './helpers.mjs';

let srv;   // 1 MiB body limit, one slot, 5-token default max_tokens, 200 ms keep-alive
before(async () => {
  srv = await startServer(['--max-body', '1048576', '--parallel', '1', '--max-tokens', '5',
                           '--keepalive-ms', '200']);
});
after(async () => {
  const { code, signal } = await srv.stop();
  assert.equal(signal, null, srv.stderr);
  assert.equal(code, 0, srv.stderr);
});

const OK = { model: 'm', messages: [{ role: 'user', content: 'hi' }], cedar_test_output: 'ok' };

async function stillServes() {
  const h = await fetch(srv.url + '/health');
  assert.equal(h.status, 200);
  const r = await post(srv.url + '/v1/chat/completions', OK);
  assert.equal(r.status, 200, r.text);
}

test('deeply nested JSON is a 400, not a crash', async () => {
  const d = 60000;
  const u = srv.url + '/v1/chat/completions';
  // a deep value followed by another key, a deep tool schema, deep tool-call arguments
  const bodies = [
    '{"model":' + '['.repeat(d) + ']'.repeat(d) + ',"messages":[]}',
    JSON.stringify({ ...OK, tools: [{ type: 'function', function: { name: 'f', parameters: {} } }] })
      .replace('"parameters":{}', '"parameters":' + '{"a":'.repeat(d) + '1' + '}'.repeat(d)),
    '{"model":"m","messages":[{"role":"assistant","content":"","tool_calls":[{"id":"c","type":' +
      '"function","function":{"name":"f","arguments":"' + '['.repeat(d) + ']'.repeat(d) +
      '"}}]},{"role":"user","content":"x"}]}',
  ];
  for (const b of bodies.slice(0, 2)) {
    const r = await post(u, b);
    assert.equal(r.status, 400, r.text.slice(0, 300));
    assert.match(r.json.error.message, /nested deeper than 128 levels/);
  }
  // arguments as a string: too deep to decode, so kept as text (rendered, answered)
  const r = await post(u, bodies[2]);
  assert.ok(r.status === 200 || r.status === 400, r.text.slice(0, 300));
  // 100 levels is fine
  const ok = JSON.stringify({ ...OK, metadata: JSON.parse('['.repeat(100) + ']'.repeat(100)) });
  assert.equal((await post(u, ok)).status, 200);
  await stillServes();
});

test('a chunked body over --max-body is refused before it is all read', async () => {
  const piece = Buffer.alloc(256 * 1024, 'x');
  const result = await new Promise((resolve) => {
    const req = http.request(srv.url + '/v1/chat/completions',
                             { method: 'POST', headers: { 'content-type': 'application/json' } },
                             (res) => {
                               let text = '';
                               res.on('data', (c) => { text += c; });
                               res.on('end', () => resolve({ status: res.statusCode, text }));
                             });
    req.on('error', () => resolve({ status: 0, text: '' }));  // closed while we still wrote
    let sent = 0;
    const pump = () => {
      // 64 MiB offered; the server stops reading at 1 MiB
      while (sent < 256 && req.write(piece)) sent++;
      if (sent < 256) req.once('drain', pump);
      else req.end();
    };
    pump();
  });
  if (result.status !== 0) {
    assert.equal(result.status, 413, result.text);
    assert.match(result.text, /too large: the limit is 1048576 bytes/);
  }
  await stillServes();
});

test('out-of-range numbers are 400s', async () => {
  const u = srv.url + '/v1/chat/completions';
  for (const v of ['1e999', '-1e999', '123456789012345678901234567890']) {
    const r = await post(u, `{"model":"m","messages":[{"role":"user","content":"hi"}],` +
                            `"max_tokens":${v}}`);
    assert.equal(r.status, 400, v + ': ' + r.text);
  }
});

test('JSON sent with curl -d\'s form content type is a 415 that says how to send it', async () => {
  // a browser may send this type cross-origin without asking first (issue 46)
  const body = JSON.stringify({ ...OK, messages: [{ role: 'user', content: 'y'.repeat(20000) }] });
  const r = await post(srv.url + '/v1/chat/completions', body,
                       { 'content-type': 'application/x-www-form-urlencoded' });
  assert.equal(r.status, 415, r.text);
  assert.match(r.json.error.message, /Content-Type: application\/json/);
});

test('an image that is only a PNG signature is refused with a 400 that says why', async () => {
  const img = { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } };
  const r = await post(srv.url + '/v1/chat/completions',
                       { ...OK, messages: [{ role: 'user', content: [{ type: 'text', text: 'what?' }, img] }] });
  assert.equal(r.status, 400, r.text);
  assert.match(r.json.error.message, /bad image: image 0: png/);
  const a = await post(srv.url + '/v1/messages', {
    model: 'm', max_tokens: 4, messages: [{ role: 'user', content: [
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }] }],
  });
  assert.equal(a.status, 400, a.text);
});

test('a second server on a port in use exits non-zero with a clear error', async () => {
  const p = spawn(BIN, ['serve', '-m', tinyModel(), '--host', '127.0.0.1', '--port',
                        String(srv.port), '-t', '1'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  p.stderr.on('data', (d) => { err += d; });
  const code = await new Promise((resolve) => p.on('exit', (c) => resolve(c)));
  assert.notEqual(code, 0);
  assert.match(err, /cannot bind 127\.0\.0\.1:\d+/);
  await stillServes();
});

test('without max_tokens the --max-tokens default applies', async () => {
  const r = await post(srv.url + '/v1/chat/completions',
                       { model: 'm', messages: [{ role: 'user', content: 'hi' }],
                         thinking: { type: 'disabled' } });
  assert.equal(r.status, 200, r.text);
  assert.ok(r.json.usage.completion_tokens <= 5, r.text);
});

test('a non-streaming client that leaves frees its slot', async () => {
  // one slot: a 100000-token generation left running would hold it for minutes. The client
  // closes its socket (what curl, requests and browsers do on abort).
  const req = http.request(srv.url + '/v1/chat/completions',
                           { method: 'POST', headers: { 'content-type': 'application/json' } },
                           (res) => res.resume());
  req.on('error', () => {});
  req.end(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }],
                           max_tokens: 100000 }));
  await new Promise((r) => setTimeout(r, 1500));
  req.destroy();
  const t0 = Date.now();
  let active = 1;
  while (active > 0 && Date.now() - t0 < 30000) {
    await new Promise((r) => setTimeout(r, 200));
    active = (await (await fetch(srv.url + '/health')).json()).active;
  }
  assert.equal(active, 0, 'the abandoned generation was not cancelled');
  await stillServes();
});

test('slow-header clients do not starve /health or generation, and are cut at the head deadline', async () => {
  // 600 of them, more than the 256 generation threads (the report: 48 froze the server)
  const slow = slowHeaderClients(srv.port, 600);
  try {
    await new Promise((r) => setTimeout(r, 1500));
    // starved, the answers would never come while the trickle goes on: give them 20 s
    const starved = new Promise((r) => setTimeout(() => r('starved'), 20000));
    assert.notEqual(await Promise.race([stillServes(), starved]), 'starved');
    // a byte a second never trips a per-read timeout; the 10 s head deadline cuts them all
    const until = Date.now() + 20000;
    while (slow.closed() < 600 && Date.now() < until) await new Promise((r) => setTimeout(r, 250));
    assert.equal(slow.closed(), 600, 'trickling clients still connected after 20 s');
    // (a 503 where the descriptor limit caps the connections below 600)
    const answered = slow.answers.filter((a) => /^HTTP\/1\.1 (408|503) /.test(a)).length;
    assert.ok(answered >= 590, `${answered} of 600 got a 408 (or 503)`);
  } finally {
    slow.stop();
  }
});
