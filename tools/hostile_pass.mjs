// A hostile pass against `cedar serve` (not a test: a measurement for people hardening the
// server). It starts the server with its stderr on a pipe that is read slowly, sends each class
// of hostile request the issue-46 pass found, and prints per class: requests tried, the statuses
// answered, requests that got no answer in 60 s (hangs), whether the server was still alive
// (crashes) and the server's peak RSS (VmHWM) after the class; then the parse time of bodies of
// many keys against same-size bodies of one key.
//
//   node tools/hostile_pass.mjs build/cedar [model dir]
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import zlib from 'node:zlib';

const [bin, model] = process.argv.slice(2);
if (!bin) throw new Error('usage: node tools/hostile_pass.mjs CEDAR_BIN [MODEL_DIR]');
const proc = spawn(bin, ['serve', ...(model ? ['-m', model] : []), '--port', '0', '--parallel', '4'],
                   { stdio: ['ignore', 'pipe', 'pipe'] });
let logBytes = 0;
proc.stderr.on('data', (d) => { logBytes += d.length; });
const port = await new Promise((resolve, reject) => {
  let out = '';
  proc.stdout.on('data', (d) => {
    out += d;
    const m = out.match(/listening on http:\/\/[\d.]+:(\d+)/);
    if (m) resolve(Number(m[1]));
  });
  proc.on('exit', (c) => reject(new Error('server exited ' + c)));
});

function request({ method = 'POST', path = '/v1/chat/completions', headers = {}, body, timeout = 60000 }) {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers, setHost: !('Host' in headers) },
                             (res) => {
                               let n = 0;
                               res.on('data', (d) => { n += d.length; });
                               res.on('end', () => resolve({ status: res.statusCode, bytes: n }));
                               res.on('error', () => resolve({ status: 'reset' }));
                             });
    req.setTimeout(timeout, () => { req.destroy(); resolve({ status: 'hang' }); });
    req.on('error', () => resolve({ status: 'reset' }));
    if (body !== undefined) req.write(body);
    req.end();
  });
}

function peakRss() {
  const s = fs.readFileSync(`/proc/${proc.pid}/status`, 'utf8');
  return Number(s.match(/VmHWM:\s+(\d+)/)[1]) / 1024;
}

const CHAT = { model: 'm', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] };
const json = { 'Content-Type': 'application/json' };
const rows = [];
async function run(name, requests, concurrency = 8) {
  const statuses = {};
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < requests.length) {
      const r = await request(requests[next++]);
      statuses[r.status] = (statuses[r.status] ?? 0) + 1;
    }
  }));
  const alive = proc.exitCode === null && proc.signalCode === null;
  const health = alive ? (await request({ method: 'GET', path: '/health', timeout: 10000 })).status : 'dead';
  rows.push({ class: name, tried: requests.length, statuses: JSON.stringify(statuses),
              hangs: statuses.hang ?? 0, crashed: !alive, health, peak_rss_mb: alive ? peakRss().toFixed(0) : '-' });
}

const body = JSON.stringify(CHAT);
const origins = ['http://evil.example', 'null', 'https://a.b.c'];
const simpleTypes = ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x'];
await run('cross-origin simple POST', Array.from({ length: 300 }, (_, i) => ({
  headers: { Origin: origins[i % 3], 'Content-Type': simpleTypes[i % 3] }, body })));
await run('simple content types, no Origin', Array.from({ length: 300 }, (_, i) => ({
  headers: { 'Content-Type': simpleTypes[i % 3] }, body })));
await run('foreign Host (DNS rebinding)', Array.from({ length: 300 }, (_, i) => ({
  method: i % 2 ? 'GET' : 'POST', path: i % 2 ? '/v1/models' : '/v1/chat/completions',
  headers: { Host: `rebind${i}.example:${port}`, ...json }, body: i % 2 ? undefined : body })));
const keys = (n) => Object.fromEntries(Array.from({ length: n }, (_, i) => ['k' + i, 1]));
await run('100,000-key objects (logit_bias, metadata)', Array.from({ length: 40 }, (_, i) => ({
  path: i % 2 ? '/v1/messages/count_tokens' : '/v1/chat/completions', headers: json,
  body: JSON.stringify({ ...CHAT, [i % 2 ? 'metadata' : 'logit_bias']: keys(100000) }) })), 5);
await run('40,000 unknown field names', Array.from({ length: 40 }, (_, r) => ({
  headers: json, body: JSON.stringify({ ...CHAT, ...Object.fromEntries(
    Array.from({ length: 40000 }, (_, i) => [`f${r}_${i}`, 1])) }) })), 4);
await run('4 and 12 MiB model names, streamed', [4, 12, 4, 12].map((m) => ({
  headers: json, body: JSON.stringify({ ...CHAT, stream: true, model: 'm'.repeat(m << 20) }) })), 2);
const schemaCounts = [{ minItems: 2 ** 63 }, { maxItems: -1 }, { minLength: 1e300 }, { maxProperties: -5 }];
await run('schema counts out of range', Array.from({ length: 40 }, (_, i) => ({
  headers: json, body: JSON.stringify({ ...CHAT, response_format: { type: 'json_schema', json_schema: {
    name: 'x', schema: { type: ['array', 'string', 'object'][i % 3], ...schemaCounts[i % 4] } } } }) })));
// a GIF whose header claims 8192x8192 pixels, 43 bytes
const gif = Buffer.from('474946383961002000200000002c00000000002000200000020144003b', 'hex');
const png = (() => {  // a PNG claiming 8192x8192, one IDAT of a few zero rows
  const crc = (b) => { let c = ~0; for (const x of b) { c ^= x; for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1)); } return ~c >>> 0; };
  const chunk = (t, d) => { const l = Buffer.alloc(4); l.writeUInt32BE(d.length); const td = Buffer.concat([Buffer.from(t), d]); const c = Buffer.alloc(4); c.writeUInt32BE(crc(td)); return Buffer.concat([l, td, c]); };
  const ihdr = Buffer.alloc(13); ihdr.writeUInt32BE(8192, 0); ihdr.writeUInt32BE(8192, 4); ihdr[8] = 8; ihdr[9] = 2;
  return Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), chunk('IHDR', ihdr),
                        chunk('IDAT', zlib.deflateSync(Buffer.alloc(8 * (1 + 8192 * 3)))), chunk('IEND', Buffer.alloc(0))]);
})();
const image = (bytes, type) => JSON.stringify({ ...CHAT, messages: [{ role: 'user', content: [
  { type: 'text', text: 'what is this' },
  { type: 'image_url', image_url: { url: `data:${type};base64,${bytes.toString('base64')}` } }] }] });
await run('image bombs, 24 at once (8192x8192 GIF and PNG)', Array.from({ length: 48 }, (_, i) => ({
  headers: json, body: i % 2 ? image(gif, 'image/gif') : image(png, 'image/png') })), 24);

console.table(rows);
console.log(`server log: ${(logBytes / 1024).toFixed(0)} KB in all`);

// parse time of many keys against one key of the same size, by body size
const parse = [];
for (const n of [25000, 50000, 100000, 200000]) {
  const many = JSON.stringify({ ...CHAT, metadata: keys(n) });
  const flat = JSON.stringify({ ...CHAT, metadata: { x: 'v'.repeat(many.length - body.length - 20) } });
  const time = async (b) => {
    let best = Infinity;
    for (let k = 0; k < 3; k++) {
      const t0 = performance.now();
      await request({ path: '/v1/messages/count_tokens', headers: json, body: b });
      best = Math.min(best, performance.now() - t0);
    }
    return best;
  };
  const a = await time(many), b = await time(flat);
  parse.push({ keys: n, body_mb: (many.length / 1e6).toFixed(2), many_keys_ms: a.toFixed(1),
               one_key_ms: b.toFixed(1), ratio: (a / b).toFixed(2) });
}
console.table(parse);
proc.kill('SIGTERM');
const code = await new Promise((resolve) => proc.on('exit', (c, s) => resolve(s ?? c)));
console.log('exit on SIGTERM:', code);
