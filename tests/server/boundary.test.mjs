// The browser and network boundary (issue 46), tried from a real headless Chromium: a page on
// another origin cannot make a key-less local server generate (no-cors fetches with the types a
// <form> may send, a typeless Blob, a form post, a CORS fetch), a page on a re-pointed name (DNS
// rebinding) is refused on the Host check, and --cors / --allowed-hosts open exactly what they
// name. The same checks without a browser, and HEAD / with a key, close the file.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import puppeteer from 'puppeteer-core';
import { startServer, post } from './helpers.mjs';

const CHROMIUM = process.env.CEDAR_CHROMIUM ?? '/usr/bin/chromium';
const CHAT = { model: 'm', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] };

let srv, open, attacker, attackerOrigin, browser;
before(async () => {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM} (scripts/install-deps.sh installs it)`);
  srv = await startServer(['--parallel', '1']);
  attacker = http.createServer((req, res) => {
    res.setHeader('content-type', 'text/html');
    res.end('<!doctype html><title>elsewhere</title><iframe name="sink"></iframe>');
  });
  await new Promise((resolve) => attacker.listen(0, '127.0.0.1', resolve));
  attackerOrigin = `http://127.0.0.1:${attacker.address().port}`;
  // a server that trusts the attacker's origin and the re-pointed name, to show the flags work
  open = await startServer(['--parallel', '1', '--cors', attackerOrigin,
                            '--allowed-hosts', 'rebind.test']);
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
           '--host-resolver-rules=MAP rebind.test 127.0.0.1'],
  });
});
after(async () => {
  await browser?.close();
  attacker?.close();
  for (const s of [srv, open]) {
    if (!s) continue;
    const { code, signal } = await s.stop();
    assert.equal(signal, null, s.stderr);
    assert.equal(code, 0, s.stderr);
  }
});

// cedar_requests_total by endpoint and status, from /metrics
async function requests(s) {
  const text = await (await fetch(s.url + '/metrics')).text();
  const out = {};
  for (const m of text.matchAll(/^cedar_requests_total\{endpoint="(\w+)",status="(\d+)"\} (\d+)$/gm))
    out[`${m[1]} ${m[2]}`] = Number(m[3]);
  return out;
}

test('a page on another origin cannot make the server generate', async () => {
  const page = await browser.newPage();
  await page.goto(attackerOrigin + '/');
  const before = await requests(srv);
  const target = srv.url + '/v1/chat/completions';
  const results = await page.evaluate(async (url, body) => {
    const out = [];
    const attempt = async (name, init) => {
      try {
        const r = await fetch(url, init);
        out.push([name, r.type, r.status]);
      } catch (e) {
        out.push([name, 'error', String(e.name)]);
      }
    };
    await attempt('text/plain', { method: 'POST', mode: 'no-cors', body,
                                  headers: { 'Content-Type': 'text/plain' } });
    await attempt('form-urlencoded', { method: 'POST', mode: 'no-cors', body,
                                       headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
    await attempt('typeless blob', { method: 'POST', mode: 'no-cors', body: new Blob([body]) });
    await attempt('cors json', { method: 'POST', body, headers: { 'Content-Type': 'application/json' } });
    // a <form> posting text/plain into an iframe: the browser's oldest way across origins
    const form = document.createElement('form');
    form.method = 'POST';
    form.action = url;
    form.enctype = 'text/plain';
    form.target = 'sink';
    const input = document.createElement('input');
    input.name = body.slice(0, -2);
    input.value = '"}';
    form.appendChild(input);
    document.body.appendChild(form);
    const loaded = new Promise((resolve) => document.querySelector('iframe').addEventListener('load', resolve));
    form.submit();
    await loaded;
    return out;
  }, target, JSON.stringify(CHAT));
  await page.close();
  // the no-cors fetches come back opaque, the CORS one fails its preflight
  assert.deepEqual(results.map((r) => r.slice(0, 2)),
                   [['text/plain', 'opaque'], ['form-urlencoded', 'opaque'],
                    ['typeless blob', 'opaque'], ['cors json', 'error']], JSON.stringify(results));
  const after = await requests(srv);
  assert.equal(after['chat 200'] ?? 0, before['chat 200'] ?? 0, 'no generation ran');
  const refused = (after['refused 403'] ?? 0) - (before['refused 403'] ?? 0);
  assert.ok(refused >= 5, `five requests (with the preflight) refused on their Origin: ${JSON.stringify(after)}`);
  assert.match(srv.stderr, new RegExp(`POST /v1/chat/completions 403`));
});

test('a re-pointed name (DNS rebinding) is refused on its Host; --allowed-hosts admits it', async () => {
  const page = await browser.newPage();
  for (const path of ['/v1/models', '/', '/health']) {
    const r = await page.goto(`http://rebind.test:${srv.port}${path}`);
    assert.equal(r.status(), 403, path);
  }
  assert.match(await page.content(), /Host 'rebind\.test' is not allowed.*--allowed-hosts rebind\.test/);
  // the page, same-origin on the name the flag allows: it reads the API and generates
  const r = await page.goto(`http://rebind.test:${open.port}/`);
  assert.equal(r.status(), 200);
  const got = await page.evaluate(async (body) => {
    const r = await fetch('/v1/chat/completions', { method: 'POST', body,
                                                    headers: { 'Content-Type': 'application/json' } });
    return [r.status, (await r.json()).object];
  }, JSON.stringify(CHAT));
  assert.deepEqual(got, [200, 'chat.completion']);
  await page.close();
});

test('--cors lets the named origin call and read the API from a page', async () => {
  const page = await browser.newPage();
  await page.goto(attackerOrigin + '/');
  const got = await page.evaluate(async (url, body) => {
    const r = await fetch(url, { method: 'POST', body, headers: { 'Content-Type': 'application/json' } });
    return [r.status, (await r.json()).object];
  }, open.url + '/v1/chat/completions', JSON.stringify(CHAT));
  assert.deepEqual(got, [200, 'chat.completion']);
  await page.close();
});

// Without a browser: raw Host and Origin values, content types.
function raw(s, { method = 'GET', path = '/v1/models', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: s.port, method, path, headers, setHost: !('Host' in headers) },
                             (res) => {
                               let text = '';
                               res.on('data', (d) => { text += d; });
                               res.on('end', () => resolve({ status: res.statusCode, text }));
                             });
    req.on('error', reject);
    if (body) req.write(body);
    req.end();
  });
}

test('Host: loopback names and IP literals pass, other names do not', async () => {
  const p = srv.port;
  for (const host of [`127.0.0.1:${p}`, `localhost:${p}`, `LOCALHOST.:${p}`, `app.localhost:${p}`,
                      `[::1]:${p}`, `10.1.2.3:${p}`, '127.0.0.1'])
    assert.equal((await raw(srv, { headers: { Host: host } })).status, 200, host);
  for (const host of [`evil.example:${p}`, 'rebind.test', `localhost.evil.example:${p}`]) {
    const r = await raw(srv, { headers: { Host: host } });
    assert.equal(r.status, 403, host);
    assert.match(JSON.parse(r.text).error.message, /--allowed-hosts/);
  }
  assert.equal((await raw(open, { headers: { Host: `rebind.test:${open.port}` } })).status, 200);
});

test('Origin: the server\'s own origin passes, any other is refused unless --cors names it', async () => {
  const own = { Origin: srv.url };
  assert.equal((await post(srv.url + '/v1/chat/completions', CHAT, own)).status, 200);
  const r = await post(srv.url + '/v1/chat/completions', CHAT, { Origin: 'http://evil.example' });
  assert.equal(r.status, 403);
  assert.match(r.json.error.message, /--cors http:\/\/evil\.example/);
  assert.equal((await post(srv.url + '/v1/chat/completions', CHAT, { Origin: 'null' })).status, 403);
  const ok = await post(open.url + '/v1/chat/completions', CHAT, { Origin: attackerOrigin });
  assert.equal(ok.status, 200);
  assert.equal(ok.headers.get('access-control-allow-origin'), attackerOrigin);
});

test('a POST body must be JSON when it says what it is', async () => {
  const body = JSON.stringify(CHAT);
  for (const type of ['text/plain', 'text/plain;charset=UTF-8', 'multipart/form-data; boundary=x',
                      'application/x-www-form-urlencoded']) {
    const r = await raw(srv, { method: 'POST', path: '/v1/chat/completions', body,
                               headers: { 'Content-Type': type } });
    assert.equal(r.status, 415, type);
  }
  for (const headers of [{ 'Content-Type': 'application/json; charset=utf-8' },
                         { 'Content-Type': 'Application/JSON' }, {}]) {
    const r = await raw(srv, { method: 'POST', path: '/v1/chat/completions', body, headers });
    assert.equal(r.status, 200, JSON.stringify(headers) + r.text);
  }
});

test('with a key, HEAD / is as open as GET /; the API is not', async () => {
  const k = await startServer(['--api-key', 'sekrit']);
  try {
    assert.equal((await fetch(k.url + '/', { method: 'HEAD' })).status, 200);
    assert.equal((await fetch(k.url + '/')).status, 200);
    assert.equal((await fetch(k.url + '/v1/models')).status, 401);
    assert.equal((await fetch(k.url + '/v1/models', { method: 'HEAD' })).status, 401);
  } finally {
    await k.stop();
  }
});
