// Image decoding cannot exhaust the server (issue "Hardening, second round"): 24 concurrent
// requests of a 35-byte GIF declaring 8192x8192 pixels stay within the image budget (peak RSS
// well under 1 GB, where they took 6 GB) and each gets a clear answer while /health answers; a
// client that leaves while its image decodes stops the decode; a JPEG of thousands of scans is
// refused at once; a request of too many images is a 400 naming the cap; Anthropic count_tokens
// counts and refuses images as /v1/messages does; SIGTERM does not wait for a decode.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, post } from './helpers.mjs';
import { gifBomb, progressiveJpeg } from './image_files.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const PNG = fs.readFileSync(path.join(here, '..', 'fuzz', 'corpus', 'image', 'rgb.png'));
const dataUrl = (mime, bytes) => `data:${mime};base64,${bytes.toString('base64')}`;

let server;
before(async () => {
  server = await startServer(['--parallel', '2']);  // the default image budget: 128 Mpx
});
after(async () => {
  const { code, signal } = await server.stop();
  assert.equal(signal, null, server.stderr);
  assert.equal(code, 0, server.stderr);
});

const chatBody = (urls, extra = {}) => ({
  model: 'm', max_tokens: 2, cedar_test_output: 'ok',
  messages: [{ role: 'user', content: [
    ...urls.map((url) => ({ type: 'image_url', image_url: { url } })),
    { type: 'text', text: 'What is this?' }] }],
  ...extra,
});

async function metrics() {
  const text = await (await fetch(server.url + '/metrics')).text();
  const value = (name) => {
    const m = text.match(new RegExp('^' + name.replace(/[{}"]/g, '\\$&') + ' (\\S+)$', 'm'));
    assert.ok(m, `${name} missing from /metrics`);
    return Number(m[1]);
  };
  return {
    inFlight: value('cedar_image_pixels_in_flight'),
    budget: value('cedar_image_pixel_budget'),
    refused: value('cedar_image_requests_refused_total'),
    stoppedClient: value('cedar_image_work_stopped_total{reason="client_gone"}'),
  };
}

async function until(cond, what) {
  for (let i = 0; i < 2000; i++) {  // bounded: 2000 x 10 ms
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.fail(`timed out waiting for ${what}`);
}

const peakRssMiB = () => {
  const m = fs.readFileSync(`/proc/${server.proc.pid}/status`, 'utf8').match(/VmHWM:\s+(\d+) kB/);
  return Number(m[1]) / 1024;
};

test('24 concurrent 8192x8192 GIF bombs: bounded memory, every request answered', async (t) => {
  const before = peakRssMiB();
  const bomb = dataUrl('image/gif', gifBomb(8192, 8192));
  assert.equal(gifBomb(8192, 8192).length, 35);
  const url = server.url + '/v1/chat/completions';
  const bombs = Array.from({ length: 24 }, () => post(url, chatBody([bomb])));
  const health = await fetch(server.url + '/health');  // while they decode
  assert.equal(health.status, 200);
  const answers = await Promise.all(bombs);
  const counts = {};
  for (const a of answers) {
    counts[a.status] = (counts[a.status] ?? 0) + 1;
    if (a.status === 503) {
      assert.match(a.json.error.message, /busy with other requests' images .* image budget in use/);
      assert.equal(a.headers.get('retry-after'), '2');
    } else {
      assert.equal(a.status, 200, a.text);
      assert.ok(a.json.usage.prompt_tokens > 900, a.text);  // the 8192x8192 image's 1000 tokens
    }
  }
  assert.equal((counts[200] ?? 0) + (counts[503] ?? 0), 24, JSON.stringify(counts));
  assert.ok(counts[200] >= 1, JSON.stringify(counts));
  const m = await metrics();
  assert.equal(m.refused, counts[503] ?? 0);
  assert.equal(m.inFlight, 0);  // every image's patches freed once the tower read them
  // One bomb decodes at a time (its decode and preprocessing need ~103 Mpx of the 128 Mpx
  // budget, ~300 MB), so the peak stays near the idle server plus one bomb: under 1 GB in all,
  // where 24 decoding at once took 6 GB.
  const peak = peakRssMiB();
  t.diagnostic(`answers ${JSON.stringify(counts)}; peak RSS ${before.toFixed(0)} MiB idle, ` +
               `${peak.toFixed(0)} MiB after`);
  assert.ok(peak < 1024, `peak RSS ${peak.toFixed(0)} MiB (before: ${before.toFixed(0)} MiB)`);
  assert.ok(peak - before < 600, `peak RSS grew by ${(peak - before).toFixed(0)} MiB`);
  const ok = await post(url, chatBody([dataUrl('image/png', PNG)]));
  assert.equal(ok.status, 200, ok.text);
});

test('a client that leaves while its image decodes stops the decode', async () => {
  // 8192x8192, 100 scans (the cap): each scan a pass over a million blocks, some seconds
  const jpeg = progressiveJpeg(8192, 8192, 100);
  const start = await metrics();
  const req = http.request(server.url + '/v1/chat/completions', {
    method: 'POST', headers: { 'content-type': 'application/json' },
  });
  req.on('error', () => {});
  req.end(JSON.stringify(chatBody([dataUrl('image/jpeg', jpeg)])));
  await until(async () => (await metrics()).inFlight > 0, 'the decode to start');
  req.destroy();
  await until(async () => {
    const m = await metrics();
    return m.stoppedClient === start.stoppedClient + 1 && m.inFlight === 0;
  }, 'the decode to stop');
  assert.match(server.stderr, /POST \/v1\/chat\/completions 499/);
});

test('a JPEG of thousands of scans and a request of too many images are 400s', async () => {
  const url = server.url + '/v1/chat/completions';
  const scans = await post(url, chatBody([dataUrl('image/jpeg', progressiveJpeg(64, 64, 3000))]));
  assert.equal(scans.status, 400, scans.text);
  assert.match(scans.json.error.message, /bad image: image 0: jpeg: the file has more than 100 scans/);
  const many = await post(url, chatBody(Array(17).fill(dataUrl('image/png', PNG))));
  assert.equal(many.status, 400, many.text);
  assert.match(many.json.error.message, /holds 17 images; at most 16 are accepted per request/);
  const sixteen = await post(url, chatBody(Array(16).fill(dataUrl('image/png', PNG))));
  assert.equal(sixteen.status, 200, sixteen.text);
});

test('count_tokens counts and refuses images exactly as /v1/messages', async () => {
  const body = (data) => ({
    model: 'm', max_tokens: 1, cedar_test_output: 'ok',
    system: 'count me ' + Math.random(),  // no prefix of another test's prompt
    messages: [{ role: 'user', content: [
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data } },
      { type: 'text', text: 'Describe it.' }] }],
  });
  const b = body(PNG.toString('base64'));
  const count = await post(server.url + '/v1/messages/count_tokens', b);
  assert.equal(count.status, 200, count.text);
  const msg = await post(server.url + '/v1/messages', b);
  assert.equal(msg.status, 200, msg.text);
  const u = msg.json.usage;
  assert.equal(count.json.input_tokens, u.input_tokens + u.cache_read_input_tokens);
  assert.ok(count.json.input_tokens > 184, count.text);  // the image's span is counted
  const corrupt = body(PNG.subarray(0, PNG.length - 20).toString('base64'));
  const c1 = await post(server.url + '/v1/messages/count_tokens', corrupt);
  const c2 = await post(server.url + '/v1/messages', corrupt);
  assert.equal(c1.status, 400, c1.text);
  assert.equal(c2.status, 400, c2.text);
  assert.match(c1.json.error.message, /bad image: image 0: png:/);
  assert.equal(c1.json.error.message, c2.json.error.message);
});

test('SIGTERM does not wait for a decode', async () => {
  const s = await startServer(['--parallel', '1']);
  const req = http.request(s.url + '/v1/chat/completions', {
    method: 'POST', headers: { 'content-type': 'application/json' },
  });
  const answered = new Promise((resolve) => {
    req.on('response', (res) => resolve(res.statusCode));
    req.on('error', () => resolve('closed'));
  });
  req.end(JSON.stringify(chatBody([dataUrl('image/jpeg', progressiveJpeg(8192, 8192, 100))])));
  for (let i = 0; i < 2000; i++) {
    const t = await (await fetch(s.url + '/metrics')).text();
    if (/^cedar_image_pixels_in_flight [1-9]/m.test(t)) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  const { code, signal } = await s.stop();
  assert.equal(signal, null, s.stderr);
  assert.equal(code, 0, s.stderr);
  const status = await answered;
  assert.ok(status === 503 || status === 'closed', String(status));
});
