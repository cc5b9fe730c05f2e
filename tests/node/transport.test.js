// DefaultChatTransport + readUIMessageStream: the ai package's own HTTP
// transport and stream assembler against the gateway's UI message stream.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DefaultChatTransport, readUIMessageStream } from 'ai';
import { chatAPI, history, partsOfType, textOf, uniqueId, userMessage } from './gateway.js';

// send posts one user message and returns the assembled assistant message.
async function send(transport, chatId, text) {
  const stream = await transport.sendMessages({
    chatId,
    messages: [userMessage(text)],
    trigger: 'submit-message',
    messageId: undefined,
    abortSignal: undefined,
  });
  const errors = [];
  let message;
  for await (const snapshot of readUIMessageStream({ stream, onError: e => errors.push(e) })) {
    message = snapshot;
  }
  assert.deepEqual(errors, [], 'the stream reported errors');
  assert.ok(message, 'the stream assembled no message');
  return message;
}

test('a server tool call assembles into text and an output-available tool part', async () => {
  const transport = new DefaultChatTransport({ api: chatAPI });
  const chatId = uniqueId('transport');
  const message = await send(transport, chatId, 'What is the weather in Paris?');

  assert.equal(message.role, 'assistant');
  assert.ok(message.id, 'the assistant message has no id');
  const [tool] = partsOfType(message, 'tool-weather');
  assert.ok(tool, `no tool-weather part in ${JSON.stringify(message.parts)}`);
  assert.equal(tool.state, 'output-available');
  assert.deepEqual(tool.input, { city: 'Paris' });
  assert.equal(tool.output.city, 'Paris');
  assert.match(textOf(message), /Let me check the weather in Paris\./);
  assert.match(textOf(message), /Here is the weather: /);
  assert.ok(partsOfType(message, 'text').every(p => p.state === 'done'), 'a text part is still streaming');
  assert.equal(partsOfType(message, 'step-start').length, 2, 'want two steps: the tool call and the answer');

  const stored = await history(chatId);
  assert.equal(stored.length, 2);
  assert.equal(stored[1].id, message.id, 'the stored assistant message has another id than the streamed one');
});

test('reconnecting after the turn finds no active stream', async () => {
  const transport = new DefaultChatTransport({ api: chatAPI });
  const chatId = uniqueId('resume');
  await send(transport, chatId, 'hello there');
  const stream = await transport.reconnectToStream({ chatId });
  assert.equal(stream, null, 'GET …/stream should answer 204 once the turn is over');
});

test('a plain answer is one text part', async () => {
  const transport = new DefaultChatTransport({ api: chatAPI });
  const message = await send(transport, uniqueId('echo'), 'hello there');
  assert.equal(textOf(message), 'Echo: hello there');
  assert.deepEqual(
    message.parts.filter(p => p.type !== 'step-start').map(p => p.type),
    ['text'],
  );
});
