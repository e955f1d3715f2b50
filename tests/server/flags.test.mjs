// The flag scheme as a user meets it: usage errors exit 2 before the port is bound or the model
// loaded, a model path that is not there exits 1 before binding too, every flag also reads
// $CEDAR_<NAME> (the command line wins), llama-server's names (-np, -a, -n) work, and help shows
// typed placeholders.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { BIN, startServer, tinyModel } from './helpers.mjs';

const serve = (args, env = {}) =>
  spawnSync(BIN, ['serve', '--port', '0', ...args], { env: { ...process.env, ...env },
                                                     timeout: 60000, encoding: 'utf8' });

test('a bad flag or value exits 2 before binding; a missing model exits 1 before binding', () => {
  for (const args of [['--parallel', '-1'], ['--speculative', 'maybe'], ['--log-format', 'xml'],
                      ['--kernels', 'nope'], ['--head-type', 'q4'], ['--temp', '-1'],
                      ['--mem-budget', '12Q'], ['--bogus'], ['stray'], ['-a', 'x', '--model-name', 'y']]) {
    const r = serve(['-m', tinyModel(), ...args]);
    assert.equal(r.status, 2, args.join(' ') + '\n' + r.stderr);
    assert.doesNotMatch(r.stdout, /bound http/, args.join(' '));
    assert.match(r.stderr, /cedar serve: error: .*\(see cedar serve --help\)/);
  }
  const env = serve(['-m', tinyModel()], { CEDAR_CTX_SIZE: 'big' });
  assert.equal(env.status, 2);
  assert.match(env.stderr, /\$CEDAR_CTX_SIZE \(--ctx-size\) expects an integer, got 'big'/);
  const missing = serve(['-m', '/nonexistent/model']);
  assert.equal(missing.status, 1);
  assert.doesNotMatch(missing.stdout, /bound http/);
  assert.match(missing.stderr, /\/nonexistent\/model: no such file or directory/);
});

test('$CEDAR_* sets a flag, the command line wins; llama-server names', async () => {
  process.env.CEDAR_PARALLEL = '3';
  process.env.CEDAR_MAX_TOKENS = '77';
  let srv;
  try {
    srv = await startServer(['-a', 'my-model', '-n', '55']);
  } finally {
    delete process.env.CEDAR_PARALLEL;
    delete process.env.CEDAR_MAX_TOKENS;
  }
  const props = await (await fetch(srv.url + '/props')).json();
  assert.equal(props.total_slots, 3);                                        // $CEDAR_PARALLEL
  assert.equal(props.default_generation_settings.params.max_tokens, 55);    // -n over $CEDAR_MAX_TOKENS
  assert.equal(props.model, 'my-model');                                     // -a
  await srv.stop();
});

test('help shows typed placeholders and the variables', () => {
  const r = spawnSync(BIN, ['serve', '--help'], { encoding: 'utf8' });
  assert.equal(r.status, 0);
  assert.match(r.stdout, /-c, --ctx-size N +.*\[\$CEDAR_CTX_SIZE\]/);
  assert.match(r.stdout, /-m, --model PATH/);
  assert.match(r.stdout, /-np, --parallel N/);
  assert.doesNotMatch(r.stdout, / V /);
});
