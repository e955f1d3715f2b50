// A hostile-client campaign against `cedar serve` over raw sockets (not part of the suite: the
// suite's tests/server/hostile.test.mjs and the fuzz targets are its seconds-long versions).
//
//   node tools/http_attack.mjs BIN MODEL_DIR [ROUNDS]
//
// Starts the server, sends ROUNDS (default 200) requests of every class below, then checks that
// the process is alive and /health and a generation still answer. Prints, per class, how many
// were sent and which status lines came back ("none": the connection closed without one).
import net from 'node:net';
import { spawn } from 'node:child_process';

const [BIN, MODEL, ROUNDS = '200'] = process.argv.slice(2);
if (!BIN || !MODEL) {
  console.error('usage: node tools/http_attack.mjs BIN MODEL_DIR [ROUNDS]');
  process.exit(2);
}
const rounds = Number(ROUNDS);

function rand(n) { return Math.floor(Math.random() * n); }
function randomBytes(n) { return Buffer.from(Array.from({ length: n }, () => rand(256))); }
const chat = (extra = '') =>
  `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":2${extra}}`;
const post = (body, head = '') =>
  `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${head}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

// Each class makes one request's bytes (a Buffer or string, or a function of the socket for
// the ones that act over time).
const classes = {
  random_bytes: () => randomBytes(1 + rand(4096)),
  random_after_request_line: () => Buffer.concat([Buffer.from('POST /v1/chat/completions HTTP/1.1\r\n'), randomBytes(1 + rand(2048))]),
  huge_header: () => `GET /health HTTP/1.1\r\nX: ${'a'.repeat(70000 + rand(100000))}\r\n\r\n`,
  many_headers: () => `GET /health HTTP/1.1\r\n${'H: v\r\n'.repeat(129 + rand(500))}\r\n`,
  bad_content_length: () => `POST /v1/chat/completions HTTP/1.1\r\nContent-Length: ${['-1', '1e3', '0x10', '99999999999999999999', ' 5', ''][rand(6)]}\r\n\r\nabcde`,
  conflicting_lengths: () => `POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nabcdef`,
  smuggling_cl_te: () => `POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n`,
  unknown_transfer_coding: () => `POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: ${['gzip', 'chunked, gzip', 'identity', 'xchunked'][rand(4)]}\r\n\r\n`,
  bad_chunk_size: () => `POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n${['zz', '-1', 'ffffffffffffffffff', '5 5', ''][rand(5)]}\r\nhello\r\n0\r\n\r\n`,
  chunk_over_limit: () => `POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n7fffffff\r\n${'x'.repeat(1000)}`,
  bad_chunk_end: () => `POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY0\r\n\r\n`,
  obs_fold: () => `GET /health HTTP/1.1\r\nX: a\r\n  b\r\n\r\n`,
  bad_version: () => `GET /health ${['HTTP/2.0', 'HTTP/1.x', 'HTTP/11', 'http/1.1', 'HTTP/0.9'][rand(5)]}\r\n\r\n`,
  bad_request_line: () => `${['GET', 'G ET', '', 'GET /health', 'GET  /health HTTP/1.1', 'GET /he\x01alth HTTP/1.1'][rand(6)]}\r\n\r\n`,
  expect_abuse: () => `POST /v1/chat/completions HTTP/1.1\r\nExpect: ${['100-continue', 'x', '200-ok'][rand(3)]}\r\nContent-Length: ${rand(2) ? 999999999 : 10}\r\n\r\n`,
  deep_json: () => post(`{"model":${'['.repeat(60000)}${']'.repeat(60000)},"messages":[]}`),
  out_of_range_numbers: () => post(chat(`,"temperature":${['1e999', '-1e999', 'NaN', '1e308', '-0'][rand(5)]}`)),
  invalid_utf8: () => {
    const body = Buffer.concat([Buffer.from('{"model":"m","messages":[{"role":"user","content":"'),
      randomBytes(1 + rand(8)).map((b) => b | 0x80), Buffer.from('"}],"max_tokens":2}')]);
    return Buffer.concat([Buffer.from(`POST /v1/chat/completions HTTP/1.1\r\nContent-Length: ${body.length}\r\n\r\n`), body]);
  },
  wrong_types: () => post(['[]', '"x"', '{"model":1}', '{"model":"m","messages":{}}', '{"model":"m","messages":[{"role":7}]}', 'null'][rand(6)]),
  pipelined_flood: () => (post(chat()) + 'GET /health HTTP/1.1\r\n\r\n').repeat(1 + rand(8)),
  close_mid_body: (s) => { s.write('POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 1000\r\n\r\n{"model":'); setTimeout(() => s.destroy(), rand(50)); },
  close_mid_generation: (s) => { s.write(post(chat().replace('"max_tokens":2', '"max_tokens":50'))); setTimeout(() => s.destroy(), rand(300)); },
};

const srv = spawn(BIN, ['serve', '-m', MODEL, '--port', '0', '--parallel', '2', '--no-cache', '--max-body', '1048576'], { stdio: ['ignore', 'pipe', 'pipe'] });
let port = 0;
srv.stderr.on('data', () => {});
await new Promise((resolve, reject) => {
  srv.on('exit', (c) => reject(new Error('server exited ' + c)));
  srv.stdout.on('data', (d) => { const m = /listening on http:\/\/[^:]+:(\d+)/.exec(d); if (m) { port = Number(m[1]); resolve(); } });
});

function attack(make) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let got = '';
    const done = () => { clearTimeout(t); s.destroy(); resolve(/^HTTP\/1\.[01] (\d{3})/.exec(got)?.[1] ?? 'none'); };
    const t = setTimeout(done, 15000);
    s.on('error', () => {});
    s.on('data', (d) => { got += d.toString('latin1'); if (got.length > 0 && got.includes('\r\n\r\n') && !/^HTTP\/1\.1 100/.test(got)) done(); });
    s.on('close', done);
    s.on('connect', () => { const v = make(s); if (v !== undefined) s.write(v); });
  });
}

const report = {};
const started = Date.now();
for (const [name, make] of Object.entries(classes)) {
  const counts = {};
  for (let i = 0; i < rounds; i += 16) {
    const batch = await Promise.all(Array.from({ length: Math.min(16, rounds - i) }, () => attack(make)));
    for (const st of batch) counts[st] = (counts[st] ?? 0) + 1;
  }
  report[name] = counts;
  if (srv.exitCode !== null) break;
}
const health = await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.status).catch(() => 'no answer');
const gen = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat() }).then((r) => r.status).catch(() => 'no answer');
const alive = srv.exitCode === null && srv.signalCode === null;
for (const [name, counts] of Object.entries(report)) console.log(`${name.padEnd(28)} ${JSON.stringify(counts)}`);
console.log(JSON.stringify({ requests: Object.keys(report).length * rounds, seconds: (Date.now() - started) / 1000, alive, health, generation: gen }));
srv.kill('SIGTERM');
process.exit(alive && health === 200 && gen === 200 ? 0 : 1);
