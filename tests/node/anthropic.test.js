// The official @anthropic-ai/sdk client against POST /v1/messages; the
// model names the agent and the request's tools are client tools.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { agent, baseURL, uniqueId } from './gateway.js';

const client = new Anthropic({ baseURL, apiKey: 'not-needed-on-loopback', maxRetries: 0 });

const getWeather = {
  name: 'get_weather',
  description: 'Get the current weather for a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const deleteFile = {
  name: 'delete_file',
  description: 'Delete a file on the client',
  input_schema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
};

test('messages.stream() → finalMessage(): text', async () => {
  const stream = client.messages.stream({ model: agent, max_tokens: 256, messages: [{ role: 'user', content: 'hello there' }] });
  const message = await stream.finalMessage();
  assert.ok(stream.request_id, 'the stream has the request-id header');
  assert.equal(message.type, 'message');
  assert.equal(message.role, 'assistant');
  assert.equal(message.model, agent);
  assert.equal(message.stop_reason, 'end_turn');
  assert.deepEqual(message.content, [{ type: 'text', text: 'Echo: hello there' }]);
  assert.ok(message.usage.output_tokens > 0, `usage: ${JSON.stringify(message.usage)}`);
});

test('messages.create(): the server tool runs in the gateway, only text comes back', async () => {
  const message = await client.messages.create({
    model: agent,
    max_tokens: 256,
    system: 'Be brief.',
    messages: [{ role: 'user', content: 'weather in Paris' }],
  });
  assert.ok(message._request_id, 'the message has the request-id header');
  assert.equal(message.stop_reason, 'end_turn');
  assert.ok(message.content.every(b => b.type === 'text'), JSON.stringify(message.content));
  assert.match(message.content.map(b => b.text).join(''), /Here is the weather: .*Paris/);
});

test('parallel tool use: two tool_use blocks, both results sent back', async () => {
  const messages = [{ role: 'user', content: 'client weather in Paris and Rome' }];
  const stream = client.messages.stream({ model: agent, max_tokens: 256, tools: [getWeather], messages });
  const message = await stream.finalMessage();
  assert.equal(message.stop_reason, 'tool_use');
  const calls = message.content.filter(b => b.type === 'tool_use');
  assert.deepEqual(
    calls.map(c => [c.name, c.input]),
    [
      ['get_weather', { city: 'Paris' }],
      ['get_weather', { city: 'Rome' }],
    ],
  );
  assert.ok(calls.every(c => c.id) && calls[0].id !== calls[1].id, 'tool_use ids');

  const next = await client.messages.create({
    model: agent,
    max_tokens: 256,
    tools: [getWeather],
    messages: [
      ...messages,
      { role: 'assistant', content: message.content },
      {
        role: 'user',
        content: calls.map(c => ({ type: 'tool_result', tool_use_id: c.id, content: JSON.stringify({ city: c.input.city, weather: 'sunny' }) })),
      },
    ],
  });
  assert.equal(next.stop_reason, 'end_turn');
  assert.match(next.content[0].text, /The client says: .*sunny/);
});

test('a client tool call the rules block never reaches the client', async () => {
  const message = await client.messages.create({
    model: agent,
    max_tokens: 256,
    tools: [deleteFile],
    messages: [{ role: 'user', content: 'client delete notes.txt' }],
  });
  assert.equal(message.stop_reason, 'end_turn');
  assert.ok(!message.content.some(b => b.type === 'tool_use'), JSON.stringify(message.content));
  assert.match(message.content.map(b => b.text).join(''), /Delete said: .*deleting files is not allowed here/);
});

test('thinking: a thinking block before the text, assembled by the SDK', async () => {
  const stream = client.messages.stream({ model: agent, max_tokens: 256, messages: [{ role: 'user', content: 'think it over' }] });
  const thoughts = [];
  stream.on('thinking', delta => thoughts.push(delta));
  const message = await stream.finalMessage();
  assert.equal(message.content[0].type, 'thinking');
  assert.equal(message.content[0].thinking, 'Weighing it up.');
  assert.equal(typeof message.content[0].signature, 'string');
  assert.equal(thoughts.join(''), 'Weighing it up.');
  assert.deepEqual(message.content[1], { type: 'text', text: 'Decided.' });
});

test('errors: an unknown model is a NotFoundError, a misspelt field a BadRequestError', async () => {
  await assert.rejects(
    client.messages.create({ model: 'no-such-agent', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }),
    err => err instanceof Anthropic.NotFoundError && err.status === 404 && err.type === 'not_found_error' && Boolean(err.requestID),
  );
  await assert.rejects(
    client.messages.create({ model: agent, max_tokens: 10, temprature: 1, messages: [{ role: 'user', content: 'hi' }] }),
    err => {
      assert.ok(err instanceof Anthropic.BadRequestError, `${err.constructor.name}: ${err.message}`);
      assert.equal(err.type, 'invalid_request_error');
      assert.match(err.error.error.message, /field temprature: is not a known field; did you mean "temperature"\?/);
      return true;
    },
  );
});

const retrying = new Anthropic({ baseURL, apiKey: 'not-needed-on-loopback', maxRetries: 2 });

test('an upstream 429 is a 429 with retry-after: messages.create retries and succeeds', async () => {
  const message = await retrying.messages.create({
    model: 'upstream',
    max_tokens: 64,
    messages: [{ role: 'user', content: `rate limited once ${uniqueId('ant')}` }],
  });
  assert.equal(message.content[0].text, 'Recovered on attempt 2.');

  const quiet = new Anthropic({ baseURL, apiKey: 'not-needed-on-loopback', maxRetries: 0 });
  await assert.rejects(
    quiet.messages.create({ model: 'upstream', max_tokens: 64, messages: [{ role: 'user', content: `rate limited once ${uniqueId('ant')}` }] }),
    err => {
      assert.ok(err instanceof Anthropic.RateLimitError, `${err.constructor.name}: ${err.message}`);
      assert.equal(err.headers.get('retry-after-ms'), '50');
      assert.equal(err.headers.get('x-should-retry'), 'true');
      return true;
    },
  );
});

test('an unavailable upstream is a 529: messages.stream() retries and finalMessage() succeeds', async () => {
  const quiet = new Anthropic({ baseURL, apiKey: 'not-needed-on-loopback', maxRetries: 0 });
  await assert.rejects(
    quiet.messages.create({ model: 'upstream', max_tokens: 64, messages: [{ role: 'user', content: `overloaded once ${uniqueId('ant')}` }] }),
    err => err.status === 529 && err.type === 'overloaded_error',
  );
  const message = await retrying.messages
    .stream({ model: 'upstream', max_tokens: 64, messages: [{ role: 'user', content: `overloaded once ${uniqueId('ant')}` }] })
    .finalMessage();
  assert.equal(message.content[0].text, 'Recovered on attempt 2.');
});

test('a failure mid-stream is an error event: finalMessage() rejects', async () => {
  await assert.rejects(
    client.messages
      .stream({ model: 'upstream', max_tokens: 64, messages: [{ role: 'user', content: `fail mid-stream ${uniqueId('ant')}` }] })
      .finalMessage(),
    err => err instanceof Anthropic.APIError,
  );
});
