// Images through every API (issue "Native vision") with the official clients: OpenAI chat
// `image_url` data URLs, Anthropic `image` blocks (base64), Responses `input_image`; usage counts
// the image's span; the answer depends on the image and repeats for the same one; an image URL
// the server would have to fetch, a corrupt image and a truncated one are 400s that say why, and
// the server keeps serving. The images are the decoders' fuzz seeds (tests/fuzz/corpus/image/).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startServer, post } from './helpers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const corpus = (name) => fs.readFileSync(path.join(here, '..', 'fuzz', 'corpus', 'image', name));
const PNG = corpus('rgb.png').toString('base64');
const JPEG = corpus('rgb.jpg').toString('base64');
const dataUrl = (mime, b64) => `data:${mime};base64,${b64}`;

let server;
let openai;
let anthropic;
before(async () => {
  server = await startServer(['--parallel', '2']);
  openai = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'unused', maxRetries: 0,
                        timeout: 300000 });
  anthropic = new Anthropic({ baseURL: server.url + '/anthropic', apiKey: 'unused',
                              maxRetries: 0, timeout: 300000 });
});
after(async () => {
  const { code, signal } = await server.stop();
  assert.equal(signal, null, server.stderr);
  assert.equal(code, 0, server.stderr);
});

const chat = (content) => openai.chat.completions.create({
  model: 'm', max_tokens: 8, temperature: 0, messages: [{ role: 'user', content }],
});
const withImage = (url) => [{ type: 'image_url', image_url: { url } },
                            { type: 'text', text: 'What is in this picture?' }];

test('OpenAI image_url: the span is counted and the answer follows the image', async () => {
  const text = await chat('What is in this picture?');
  const png = await chat(withImage(dataUrl('image/png', PNG)));
  const again = await chat(withImage(dataUrl('image/png', PNG)));
  const jpeg = await chat(withImage(dataUrl('image/jpeg', JPEG)));
  // a small image is scaled up to min_pixels: 39 x 39 patches, a 13 x 13 grid, 184 tokens
  // (START + 13 x (13 + NEWLINE) + END), plus the "\n\n" that joins it to the text
  const extra = png.usage.prompt_tokens - text.usage.prompt_tokens;
  assert.ok(extra >= 184 && extra <= 186, `image added ${extra} prompt tokens`);
  assert.equal(jpeg.usage.prompt_tokens, png.usage.prompt_tokens);
  assert.equal(again.choices[0].message.content + again.choices[0].message.reasoning_content,
               png.choices[0].message.content + png.choices[0].message.reasoning_content);
  assert.notEqual(jpeg.choices[0].message.reasoning_content + jpeg.choices[0].message.content,
                  png.choices[0].message.reasoning_content + png.choices[0].message.content);
});

test('Anthropic image block (base64) and Responses input_image', async () => {
  const m = await anthropic.messages.create({
    model: 'm', max_tokens: 4, messages: [{ role: 'user', content: [
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
      { type: 'text', text: 'Describe it.' }] }],
  });
  assert.equal(m.type, 'message');
  assert.ok(m.usage.input_tokens > 184, JSON.stringify(m.usage));
  const r = await openai.responses.create({
    model: 'm', max_output_tokens: 4, input: [{ role: 'user', content: [
      { type: 'input_image', image_url: dataUrl('image/jpeg', JPEG) },
      { type: 'input_text', text: 'Describe it.' }] }],
  });
  assert.equal(r.status, 'incomplete');
  assert.ok(r.usage.input_tokens > 184, JSON.stringify(r.usage));
});

test('bad images are 400s that say why, and the server keeps serving', async () => {
  const u = server.url + '/v1/chat/completions';
  const ask = (url) => post(u, { model: 'm', max_tokens: 2, messages: [{ role: 'user', content:
    [{ type: 'image_url', image_url: { url } }, { type: 'text', text: 'x' }] }] });
  const remote = await ask('https://example.com/cat.png');
  assert.equal(remote.status, 400, remote.text);
  assert.match(remote.json.error.message, /only base64 data URLs/);
  const garbage = await ask(dataUrl('image/png', Buffer.from('not an image at all').toString('base64')));
  assert.equal(garbage.status, 400, garbage.text);
  assert.match(garbage.json.error.message, /bad image: image 0: .*not a PNG, JPEG, WebP or GIF/);
  const cut = corpus('rgb.png').subarray(0, 100).toString('base64');
  const truncated = await ask(dataUrl('image/png', cut));
  assert.equal(truncated.status, 400, truncated.text);
  assert.match(truncated.json.error.message, /truncated/);
  const badB64 = await ask('data:image/png;base64,@@@@');
  assert.equal(badB64.status, 400, badB64.text);
  const a = await post(server.url + '/anthropic/v1/messages', { model: 'm', max_tokens: 2,
    messages: [{ role: 'user', content: [
      { type: 'image', source: { type: 'url', url: 'https://example.com/cat.png' } }] }] });
  assert.equal(a.status, 400, a.text);
  const ok = await chat(withImage(dataUrl('image/png', PNG)));
  assert.equal(ok.choices.length, 1);
});
