// Shared helpers for the `cedar serve` end-to-end tests (node --test, official client libraries).
//
// Environment:
//   CEDAR_BIN          the cedar binary (required)
//   CEDAR_TEST_MODEL   an existing model directory to serve (default: a tiny model generated
//                      once with `cedar make-model --preset tiny --seed 1` under the OS temp dir)
//   CEDAR_TEST_THREADS forward threads of the server (default 2)
//
// Random weights produce random text, so the tests that need a structured answer (reasoning,
// a DSML tool call, JSON, a stop sequence) start the server with --enable-test-hooks and send
// the request field `cedar_test_output`: the server still prefills the real prompt with the
// model, then emits exactly the tokens of that text (special tokens such as </think> and the
// DSML tags recognised) through the same parser / streaming path as sampled tokens, ending with
// EOS. Tests without that field exercise real sampling.
import { spawn, execFileSync } from 'node:child_process';
import net from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const BIN = process.env.CEDAR_BIN;
if (!BIN) throw new Error('set CEDAR_BIN to the cedar binary');

export function tinyModel() {
  if (process.env.CEDAR_TEST_MODEL) return process.env.CEDAR_TEST_MODEL;
  const root = path.join(os.tmpdir(), 'cedar-server-tests');
  const dir = path.join(root, 'tiny-seed1');
  if (fs.existsSync(path.join(dir, 'config.json'))) return dir;
  fs.mkdirSync(root, { recursive: true });
  // Generate into a private directory and rename, so parallel test files never see half a model.
  const tmp = fs.mkdtempSync(path.join(root, 'gen-'));
  execFileSync(BIN, ['make-model', '--preset', 'tiny', '--seed', '1', '--out', tmp], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    fs.renameSync(tmp, dir);
  } catch {
    fs.rmSync(tmp, { recursive: true, force: true });  // another file won the race
  }
  return dir;
}

// Starts `cedar serve` on a free loopback port. Resolves to { url, port, proc, stderr, stop }.
// `model`: a model directory, null for the embedded default model; absent: tinyModel().
export async function startServer(extraArgs = [], { testHooks = true, model } = {}) {
  const dir = model === undefined ? tinyModel() : model;
  const args = ['serve', ...(dir === null ? [] : ['-m', dir]), '--host', '127.0.0.1', '--port', '0',
                '-t', process.env.CEDAR_TEST_THREADS ?? '2', ...extraArgs];
  if (testHooks) args.push('--enable-test-hooks');
  const proc = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  const port = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('server did not start in 60 s: ' + stderr)),
                             60000);
    // the start-up lines: text on stdout, or JSON log lines on stderr (--log-format json)
    const look = (text) => {
      const m = text.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    proc.stderr.on('data', (d) => { stderr += d; look(stderr); });
    proc.stdout.on('data', (d) => { out += d; look(out); });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening: ${stderr}`));
    });
  });
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    port,
    proc,
    get stderr() { return stderr; },
    // SIGTERM and wait: a clean exit (status 0) proves the server never crashed.
    async stop() {
      if (proc.exitCode !== null || proc.signalCode !== null)
        return { code: proc.exitCode, signal: proc.signalCode };
      const done = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
      proc.kill('SIGTERM');
      return done;
    },
  };
}

// A raw request (for malformed bodies and framing checks the SDKs would not produce).
export async function post(url, body, headers = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, text, json, headers: res.headers };
}

// Parses an SSE body into frames [{event, data}] (comments dropped) and checks the framing:
// every frame ends with a blank line and every data line of a JSON stream parses.
export function parseSse(text) {
  const frames = [];
  const comments = [];
  if (!text.endsWith('\n\n')) throw new Error('SSE body does not end with a blank line');
  for (const block of text.split('\n\n')) {
    if (block === '') continue;
    let event = null;
    const data = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) comments.push(line);
      else if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('data: ')) data.push(line.slice(6));
      else throw new Error(`bad SSE line: ${JSON.stringify(line)}`);
    }
    if (data.length) frames.push({ event, data: data.join('\n') });
  }
  return { frames, comments };
}

// A DSML tool-call block as V4.1 writes it (v41-interface.md §3.5), for cedar_test_output.
export function dsmlCall(name, params) {
  const lines = ['<｜DSML｜ calls>', `<｜DSML｜ invoke name="${name}">`];
  for (const [k, v] of Object.entries(params)) {
    const isString = typeof v === 'string';
    lines.push(`<｜DSML｜ parameter name="${k}" string="${isString}">` +
               `${isString ? v : JSON.stringify(v)}</｜DSML｜ parameter>`);
  }
  lines.push('</｜DSML｜ invoke>', '</｜DSML｜ calls>');
  return '\n\n' + lines.join('\n');
}

export const WEATHER_TOOL = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Weather forecast for a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' }, days: { type: 'integer' } },
      required: ['city'],
    },
  },
};

// n connections that send a request line and then trickle their headers one byte a second,
// never finishing them (slow-header clients). Returns stop(), which closes them.
export function slowHeaderClients(port, n) {
  const socks = [];
  const answers = [];  // what each socket received from the server
  let closed = 0;
  for (let i = 0; i < n; i++) {
    const s = net.connect(port, '127.0.0.1');
    answers.push('');
    s.on('error', () => {});
    s.on('data', (d) => { answers[i] += d.toString(); });
    s.on('close', () => { closed++; });
    s.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n');
    socks.push(s);
  }
  const trickle = setInterval(() => {
    for (const s of socks) if (!s.destroyed && s.writable) s.write('X');
  }, 1000);
  return {
    answers,
    closed: () => closed,
    stop() {
      clearInterval(trickle);
      for (const s of socks) s.destroy();
    },
  };
}
