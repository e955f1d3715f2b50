// A bounded mixed load on loopback: 80 requests from 8 concurrent workers, 10% malformed (bad
// JSON, wrong types, a body over --max-body, 20,000 levels of nesting, 1e999, an image, a client
// that disconnects mid-stream, one that leaves a non-streaming answer), while 32 clients trickle
// their headers a byte a second. Every valid request must be answered completely, every
// malformed one must get a 4xx (or be dropped by the client itself), both abandoned generations
// must be cancelled, and the server must exit cleanly afterwards (0 crashes).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startServer, post, parseSse, slowHeaderClients } from './helpers.mjs';

let server;
before(async () => {
  server = await startServer(['--parallel', '4', '--max-body', '262144', '--keepalive-ms', '300']);
});
after(async () => {
  const { code, signal } = await server.stop();
  assert.equal(signal, null, 'server crashed: ' + server.stderr);
  assert.equal(code, 0, server.stderr);
});

const TOTAL = 80;
const WORKERS = 8;

function kindOf(i) {
  // Every 10th request is malformed, each of the eight kinds once.
  if (i % 10 === 9)
    return ['bad-json', 'wrong-type', 'huge', 'disconnect', 'deep', 'overflow', 'image',
            'leaver'][(i / 10 | 0) % 8];
  return ['chat', 'chat-stream', 'anthropic-stream', 'forced-tool'][i % 4];
}

const MSG = (i) => [{ role: 'user', content: `request ${i}` }];

async function run(i) {
  const chat = server.url + '/v1/chat/completions';
  switch (kindOf(i)) {
    case 'chat': {
      const r = await post(chat, { model: 'm', messages: MSG(i), max_tokens: 4, seed: i });
      assert.equal(r.status, 200, r.text);
      assert.ok(r.json.choices[0].finish_reason);
      return 'valid';
    }
    case 'chat-stream': {
      const r = await post(chat, { model: 'm', messages: MSG(i), max_tokens: 4, stream: true });
      assert.equal(r.status, 200, r.text);
      assert.equal(parseSse(r.text).frames.at(-1).data, '[DONE]');
      return 'valid';
    }
    case 'anthropic-stream': {
      const r = await post(server.url + '/v1/messages',
                           { model: 'm', max_tokens: 4, messages: MSG(i), stream: true });
      assert.equal(r.status, 200, r.text);
      const types = parseSse(r.text).frames.map((f) => f.event);
      assert.equal(types[0], 'message_start');
      assert.equal(types.at(-1), 'message_stop');
      return 'valid';
    }
    case 'forced-tool': {
      const r = await post(chat, {
        model: 'm', messages: MSG(i),
        tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
        cedar_test_output: 'x</think>\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name="f">\n' +
                           '<｜DSML｜ parameter name="n" string="false">1</｜DSML｜ parameter>\n' +
                           '</｜DSML｜ invoke>\n</｜DSML｜ calls>',
      });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.choices[0].finish_reason, 'tool_calls');
      return 'valid';
    }
    case 'bad-json': {
      const r = await post(chat, '{"model": "m", "messages": [');
      assert.equal(r.status, 400);
      return 'malformed';
    }
    case 'wrong-type': {
      const r = await post(chat, { model: 'm', messages: MSG(i), max_tokens: 'lots' });
      assert.equal(r.status, 400);
      assert.match(r.json.error.message, /max_tokens must be an integer/);
      return 'malformed';
    }
    case 'huge': {
      try {
        const r = await post(chat, { model: 'm', messages: [{ role: 'user', content: 'y'.repeat(400000) }] });
        assert.equal(r.status, 413);
      } catch {
        // the server may close the connection while the client still sends: also fine
      }
      return 'malformed';
    }
    case 'deep': {
      const r = await post(chat, '{"model":"m","messages":' + '['.repeat(20000) + ']'.repeat(20000) + '}');
      assert.equal(r.status, 400);
      assert.match(r.json.error.message, /nested deeper than 128 levels/);
      return 'malformed';
    }
    case 'overflow': {
      const r = await post(chat, `{"model":"m","messages":${JSON.stringify(MSG(i))},"max_tokens":1e999}`);
      assert.equal(r.status, 400, r.text);
      return 'malformed';
    }
    case 'image': {
      const r = await post(chat, { model: 'm', messages: [{ role: 'user', content: [
        { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }] }] });
      assert.equal(r.status, 400, r.text);
      return 'malformed';
    }
    case 'leaver': {
      // a non-streaming generation whose client closes its socket after 300 ms
      await new Promise((resolve) => {
        const req = http.request(chat, { method: 'POST', headers: { 'content-type': 'application/json' } },
                                 (res) => res.resume());
        req.on('error', () => {});
        req.end(JSON.stringify({ model: 'm', messages: MSG(i), max_tokens: 4000 }));
        setTimeout(() => { req.destroy(); resolve(); }, 300);
      });
      return 'malformed';
    }
    case 'disconnect': {
      const ac = new AbortController();
      const res = await fetch(chat, {
        method: 'POST', signal: ac.signal, headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: MSG(i), max_tokens: 400, stream: true }),
      });
      assert.equal(res.status, 200);
      const reader = res.body.getReader();
      await reader.read();  // the first bytes, then hang up mid-stream
      ac.abort();
      return 'malformed';
    }
  }
  throw new Error('unreachable');
}

test(`${TOTAL} requests, 10% malformed, slow clients: 0 crashes, every valid request answered`, async () => {
  const slow = slowHeaderClients(server.port, 32);
  const t0 = Date.now();
  let next = 0;
  const results = { valid: 0, malformed: 0 };
  const worker = async () => {
    while (next < TOTAL) {
      const i = next++;
      results[await run(i)]++;
    }
  };
  try {
    await Promise.all(Array.from({ length: WORKERS }, worker));
  } finally {
    slow.stop();
  }
  console.log(`[ info ] mixed load: ${results.valid} valid answered, ${results.malformed} ` +
              `malformed refused or abandoned, 32 slow-header clients, ` +
              `${((Date.now() - t0) / 1000).toFixed(1)} s`);
  assert.equal(results.valid, 72);
  assert.equal(results.malformed, 8);

  // The hung-up generations were cancelled, not run to max_tokens (bounded wait).
  let cancelled = 0;
  for (let t = 0; t < 100 && cancelled < 2; t++) {
    const m = await (await fetch(server.url + '/metrics')).text();
    cancelled = Number(m.match(/cedar_requests_cancelled_total (\d+)/)[1]);
    if (cancelled < 2) await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(cancelled, 2, 'the abandoned stream and non-streaming answer were cancelled');
  const h = await (await fetch(server.url + '/health')).json();
  assert.equal(h.status, 'ok');
});
