// The official openai client against the OpenAI-compatible endpoint; the
// model names the agent and the request's tools are client tools.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';
import { agent, baseURL, uniqueId } from './gateway.js';

const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'not-needed-on-loopback', maxRetries: 0 });

const getWeather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Get the current weather for a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' } },
      required: ['city'],
      additionalProperties: false,
    },
  },
};

test('stream(): a declared client tool comes back as assembled tool_calls', async () => {
  const messages = [{ role: 'user', content: 'client weather in Paris' }];
  const stream = client.chat.completions.stream({
    model: agent,
    messages,
    tools: [getWeather],
    stream_options: { include_usage: true },
  });
  const completion = await stream.finalChatCompletion();

  const [choice] = completion.choices;
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.role, 'assistant');
  assert.equal(choice.message.tool_calls.length, 1);
  const [call] = choice.message.tool_calls;
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris' });
  assert.ok(call.id, 'the tool call has no id');
  assert.ok(completion.usage?.total_tokens > 0, `usage: ${JSON.stringify(completion.usage)}`);

  // The client runs the tool and sends the result back.
  const next = await client.chat.completions
    .stream({
      model: agent,
      tools: [getWeather],
      messages: [
        ...messages,
        choice.message,
        { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ city: 'Paris', weather: 'sunny' }) },
      ],
    })
    .finalChatCompletion();
  assert.equal(next.choices[0].finish_reason, 'stop');
  assert.match(next.choices[0].message.content, /The client says: .*sunny/);
});

test('create({stream: true}): plain text deltas', async () => {
  const stream = await client.chat.completions.create({
    model: agent,
    messages: [{ role: 'user', content: 'hello there' }],
    stream: true,
  });
  let text = '';
  let finish;
  let role;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    const [choice] = chunk.choices;
    role ??= choice?.delta?.role;
    text += choice?.delta?.content ?? '';
    finish = choice?.finish_reason ?? finish;
  }
  assert.equal(role, 'assistant');
  assert.equal(text, 'Echo: hello there');
  assert.equal(finish, 'stop');
});

test('create(): non-streaming, with the server tool run by the gateway', async () => {
  const completion = await client.chat.completions.create({
    model: agent,
    messages: [{ role: 'user', content: 'weather in Paris' }],
  });
  assert.equal(completion.object, 'chat.completion');
  const [choice] = completion.choices;
  assert.equal(choice.finish_reason, 'stop');
  assert.equal(choice.message.role, 'assistant');
  assert.match(choice.message.content, /Here is the weather: .*Paris/);
  assert.equal(choice.message.tool_calls ?? undefined, undefined, 'server tools must not reach the client');
});

test('an unknown model is a NotFoundError', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'no-such-agent', messages: [{ role: 'user', content: 'hi' }] }),
    err => err instanceof OpenAI.NotFoundError && err.status === 404,
  );
});

// fields is the part of a model object the gateway sets.
const fields = ({ id, object, created, owned_by }) => ({ id, object, created, owned_by });

test('models.list() and models.retrieve(): the agents are the models', async () => {
  const ids = [];
  for await (const model of client.models.list()) {
    assert.deepEqual(fields(model), { id: model.id, object: 'model', created: 0, owned_by: 'turngate' });
    ids.push(model.id);
  }
  // tests/testdata/node/turngate.yaml's agents, sorted by name.
  assert.deepEqual(ids, ['demo', 'limited', 'slow', 'upstream']);

  const model = await client.models.retrieve(agent);
  assert.deepEqual(fields(model), { id: agent, object: 'model', created: 0, owned_by: 'turngate' });

  await assert.rejects(
    client.models.retrieve('no-such-agent'),
    err => err instanceof OpenAI.NotFoundError && err.status === 404 && err.code === 'model_not_found',
  );
});

// retrying is the client as an application configures it: the SDK's
// default retries, with short delays.
const retrying = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'not-needed-on-loopback', maxRetries: 2 });

test('an upstream 429 is a 429 with retry-after: the SDK retries and succeeds', async () => {
  const completion = await retrying.chat.completions.create({
    model: 'upstream',
    messages: [{ role: 'user', content: `rate limited once ${uniqueId('oai')}` }],
  });
  assert.equal(completion.choices[0].message.content, 'Recovered on attempt 2.');
});

test('the 429 itself: status, type and retry headers', async () => {
  const quiet = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'not-needed-on-loopback', maxRetries: 0 });
  await assert.rejects(
    quiet.chat.completions.create({
      model: 'upstream',
      messages: [{ role: 'user', content: `rate limited once ${uniqueId('oai')}` }],
    }),
    err => {
      assert.ok(err instanceof OpenAI.RateLimitError, `${err.constructor.name}: ${err.message}`);
      assert.equal(err.status, 429);
      assert.equal(err.headers.get('retry-after-ms'), '50');
      assert.equal(err.headers.get('retry-after'), '1');
      assert.equal(err.headers.get('x-should-retry'), 'true');
      return true;
    },
  );
});

test('an upstream 5xx before the stream starts: the SDK retries the stream and succeeds', async () => {
  const stream = await retrying.chat.completions.create({
    model: 'upstream',
    messages: [{ role: 'user', content: `overloaded once ${uniqueId('oai')}` }],
    stream: true,
  });
  let text = '';
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.equal(text, 'Recovered on attempt 2.');
});

test('an upstream 4xx is not retried', async () => {
  await assert.rejects(
    retrying.chat.completions.create({
      model: 'upstream',
      messages: [{ role: 'user', content: `bad request ${uniqueId('oai')}` }],
    }),
    err => {
      assert.equal(err.status, 502, `${err.constructor.name}: ${err.message}`);
      assert.equal(err.headers.get('x-should-retry'), 'false');
      return true;
    },
  );
});

// quotaRefusals reads the gateway's count of the limited agent's refused
// turns from /metrics.
async function quotaRefusals() {
  const text = await (await fetch(`${baseURL}/metrics`)).text();
  const line = text.split('\n').find(l => l.startsWith('turngate_quota_exceeded_total{') && l.includes('quota="limited-turns"'));
  return line ? Number(line.split(' ').pop()) : 0;
}

test('a turn over a quota is a 429 with x-ratelimit-* headers: the SDK retries, then surfaces it', async () => {
  // The limited agent's quota: one turn a minute per principal.
  const first = await retrying.chat.completions.create({ model: 'limited', messages: [{ role: 'user', content: 'hello there' }] });
  assert.equal(first.choices[0].message.content, 'Echo: hello there');
  const before = await quotaRefusals();
  await assert.rejects(
    retrying.chat.completions.create({ model: 'limited', messages: [{ role: 'user', content: 'hello again' }] }),
    err => {
      assert.ok(err instanceof OpenAI.RateLimitError, `${err.constructor.name}: ${err.message}`);
      assert.equal(err.status, 429);
      assert.equal(err.code, 'quota_exceeded');
      assert.match(err.message, /quota limited-turns is used up: 1 turns per 1m per principal/);
      assert.equal(err.headers.get('x-ratelimit-limit-requests'), '1');
      assert.equal(err.headers.get('x-ratelimit-remaining-requests'), '0');
      assert.match(err.headers.get('x-ratelimit-reset-requests'), /^(\d+h)?(\d+m)?\d+s$/); // OpenAI's spelling: 1m1s
      assert.ok(Number(err.headers.get('retry-after')) > 0, `retry-after ${err.headers.get('retry-after')}`);
      assert.equal(err.headers.get('x-should-retry'), 'true');
      return true;
    },
  );
  // The SDK asked three times (maxRetries: 2): each refused before the model ran.
  assert.equal((await quotaRefusals()) - before, 3);
});
