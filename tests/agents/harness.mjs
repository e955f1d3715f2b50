// The machinery of the agent-client tests: `cedar serve` on the embedded default model, a
// recording proxy between a client and the server, a sink for any traffic a client sends
// elsewhere, and a runner for one headless client session.
//
// The proxy forwards every request unchanged, with one exception: the request that starts the
// shell-tool task gets the test hook's field `cedar_test_output` (the server was started with
// --enable-test-hooks), so that cedar answers it with a DSML call of the client's own shell tool.
// Every later turn is sampled by the model as usual. The proxy records each request body, the
// response status and body, and the usage the response reports.
import { spawn } from 'node:child_process';
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dsmlCall, startServer } from '../server/helpers.mjs';

const HERE = path.dirname(new URL(import.meta.url).pathname);
export const CLIENT_BIN = path.join(HERE, 'node_modules', '.bin');

// `cedar serve` with the embedded default model on a free loopback port, test hooks on.
export function startCedar(extraArgs = []) {
  return startServer(extraArgs, { model: null });
}

// The usage a response body reports (streamed or not, any of the three APIs): prompt tokens and
// the part of them served from cedar's caches.
export function usageOf(text) {
  const nums = (re) => [...text.matchAll(re)].map((m) => Number(m[1]));
  const max = (a) => (a.length ? Math.max(...a) : null);
  const cached = max([...nums(/"cache_read_input_tokens":(\d+)/g), ...nums(/"cached_tokens":(\d+)/g)]);
  const uncachedAnthropic = max(nums(/"input_tokens":(\d+),"cache_creation_input_tokens"/g));
  let prompt = max([...nums(/"prompt_tokens":(\d+)/g), ...nums(/"input_tokens":(\d+),"input_tokens_details"/g)]);
  if (prompt === null && uncachedAnthropic !== null) prompt = uncachedAnthropic + (cached ?? 0);
  return { prompt, cached };
}

// A recording proxy in front of `target`. `inject(body, record)` may return the text cedar is to
// answer with (cedar_test_output); it sees every JSON request before it is forwarded.
export async function startProxy(target, inject = () => null) {
  const t = new URL(target);
  const records = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('error', () => {});  // a client that leaves mid-request: nothing to record
    res.on('error', () => {});
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      let raw = Buffer.concat(chunks);
      const rec = { method: req.method, path: req.url, body: null, status: 0, response: '',
                    injected: null };
      // A record is settled when the upstream answer ends or its connection closes: a client
      // may exit the moment it reads the last event, before the chunked body's terminator
      // reaches the proxy, so what arrived is recorded either way and the test waits for it.
      let settle;
      rec.settled = new Promise((r) => { settle = r; });
      const out = [];
      const finish = () => {
        rec.response = Buffer.concat(out).toString();
        rec.usage = usageOf(rec.response);
        settle();
      };
      records.push(rec);
      try { rec.body = raw.length ? JSON.parse(raw.toString()) : null; } catch { /* not JSON */ }
      if (rec.body && typeof rec.body === 'object') {
        const forced = inject(rec.body, rec);
        if (forced !== null && forced !== undefined) {
          rec.injected = forced;
          raw = Buffer.from(JSON.stringify({ ...rec.body, cedar_test_output: forced }));
        }
      }
      const headers = { ...req.headers, host: t.host, 'content-length': String(raw.length) };
      delete headers['accept-encoding'];  // keep the recorded body readable
      const up = http.request({ host: t.hostname, port: t.port, method: req.method,
                                path: req.url, headers }, (ur) => {
        rec.status = ur.statusCode;
        res.writeHead(ur.statusCode, ur.headers);
        ur.on('error', () => {});  // the client left and the upstream was destroyed
        ur.on('data', (c) => { out.push(c); res.write(c); });
        ur.on('end', () => res.end());
        ur.on('close', finish);
      });
      up.on('error', (e) => {
        finish();
        rec.status = 502;
        if (!res.headersSent) res.writeHead(502);
        res.end(String(e));
      });
      res.on('close', () => { if (!res.writableFinished) up.destroy(); });
      up.end(raw);
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    records,
    // Every record settled, or `ms` passed (a request still streaming when its client quit).
    settled: (ms = 10000) => Promise.race([
      Promise.all(records.map((r) => r.settled)),
      new Promise((r) => setTimeout(r, ms).unref()),
    ]),
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }),
  };
}

// Where a client's traffic to anywhere but loopback ends: an HTTP(S) proxy that answers 403 and
// records the host. Offline switches should keep this list empty; what reaches it is reported.
export async function startSink() {
  const hosts = [];
  const server = http.createServer((req, res) => {
    hosts.push(req.headers.host ?? req.url);
    res.writeHead(403);
    res.end();
  });
  server.on('connect', (req, socket) => {
    hosts.push(req.url);
    socket.on('error', () => {});  // a client may reset the refused tunnel
    socket.end('HTTP/1.1 403 Forbidden\r\n\r\n');
  });
  server.on('clientError', (err, socket) => socket.destroy());
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    hosts,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }),
  };
}

// A fresh home and working directory for one client session.
export function sandbox(name) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), `cedar-agent-${name}-`));
  const home = path.join(root, 'home');
  const work = path.join(root, 'work');
  fs.mkdirSync(home);
  fs.mkdirSync(work);
  return { root, home, work };
}

// Kills what a client left running in its sandbox (cline starts a hub daemon that outlives it,
// in its own session, so neither the child nor its process group reaches it): any process whose
// working directory lies under dir or whose command line names dir.
function reapStragglers(dir) {
  for (const pid of fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
    if (Number(pid) === process.pid) continue;
    try {
      const cwd = fs.readlinkSync(`/proc/${pid}/cwd`);
      const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (cwd === dir || cwd.startsWith(dir + '/') || cmdline.includes(dir)) process.kill(Number(pid), 'SIGKILL');
    } catch { /* gone meanwhile, or not ours to read */ }
  }
}

// Runs a client to its end (or kills it after timeoutMs), then whatever it left running in its
// working directory. Resolves to {code, signal, stdout, stderr, seconds}.
export function runClient(cmd, args, { env, cwd, timeoutMs = 240000, input = '' }) {
  const t0 = Date.now();
  return new Promise((resolve) => {
    const proc = spawn(cmd, args, { env, cwd, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    proc.stdout.on('data', (d) => { stdout += d; });
    proc.stderr.on('data', (d) => { stderr += d; });
    proc.stdin.on('error', () => {});  // a client that exits at once closes its stdin
    proc.stdin.end(input);
    const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
    proc.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (cwd) reapStragglers(cwd);
      resolve({ code, signal, stdout, stderr, seconds: (Date.now() - t0) / 1000 });
    });
  });
}

// A call of `name` as V4.1 writes it, after the reasoning when the prompt opened one: what the
// test hook makes cedar answer with.
export function dsmlAnswer(thinking, name, params) {
  return (thinking ? 'I will run the command.</think>' : '') + dsmlCall(name, params);
}

// The environment every client runs in: its own HOME, traffic to anything but loopback sent to
// the sink, no colour.
export function baseEnv(home, sinkUrl, extra) {
  const env = {
    PATH: process.env.PATH, HOME: home, TERM: 'dumb', NO_COLOR: '1', LANG: 'C.UTF-8',
    TMPDIR: os.tmpdir(),
    HTTP_PROXY: sinkUrl, HTTPS_PROXY: sinkUrl, http_proxy: sinkUrl, https_proxy: sinkUrl,
    ALL_PROXY: sinkUrl, NO_PROXY: '127.0.0.1,localhost', no_proxy: '127.0.0.1,localhost',
    ...extra,
  };
  return env;
}
