// The official openai client against the OpenAI-compatible endpoint; the
// model names the agent and the request's tools are client tools.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';
import { agent, baseURL } from './gateway.js';

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
