// A turn cut short — cancelled by the user, or failed upstream — through
// the ai package's own stream assembler: the partial assistant message is
// marked interrupted (metadata.interrupted) and its cut-off text part stays
// "streaming", in the client's message and in the stored transcript alike.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DefaultChatTransport, readUIMessageStream } from 'ai';
import { baseURL, history, partsOfType, textOf, uniqueId, userMessage } from './gateway.js';

// open posts one user message to agentName and returns the UI message
// stream the transport reads.
async function open(agentName, chatId, text) {
  const transport = new DefaultChatTransport({ api: `${baseURL}/v1/agents/${agentName}/chat` });
  return transport.sendMessages({
    chatId,
    messages: [userMessage(text)],
    trigger: 'submit-message',
    messageId: undefined,
    abortSignal: undefined,
  });
}

// checkInterrupted checks one assembled or stored message.
function checkInterrupted(message, status, where) {
  assert.equal(message.metadata?.interrupted, status, `${where}: metadata ${JSON.stringify(message.metadata)}`);
  const texts = partsOfType(message, 'text');
  assert.equal(texts.length, 1, `${where}: parts ${JSON.stringify(message.parts)}`);
  assert.equal(texts[0].state, 'streaming', `${where}: the cut-off text part is marked ${texts[0].state}`);
}

test('a cancelled turn: the partial message is interrupted for the client and in history', async () => {
  const chatId = uniqueId('cancel');
  const stream = await open('slow', chatId, 'tell me a long story');
  let message;
  let cancelled = false;
  for await (const snapshot of readUIMessageStream({ stream })) {
    message = snapshot;
    if (!cancelled && textOf(message).length > 0) {
      cancelled = true;
      const res = await fetch(`${baseURL}/v1/agents/slow/sessions/${chatId}/cancel`, { method: 'POST' });
      assert.equal(res.status, 200, `cancel: ${await res.text()}`);
    }
  }
  assert.ok(cancelled, 'the stream ended before any text');
  assert.ok(!textOf(message).includes('reasonably expect'), 'the story was not cut short');
  checkInterrupted(message, 'aborted', 'client');

  const stored = await history(chatId, 'slow');
  assert.equal(stored.length, 2);
  assert.equal(stored[1].id, message.id);
  checkInterrupted(stored[1], 'aborted', 'history');
  assert.equal(textOf(stored[1]), textOf(message), 'the stored partial text differs from what the client got');
});

test('an upstream failure mid-stream: the partial message is interrupted with the error', async () => {
  const chatId = uniqueId('fail');
  const stream = await open('upstream', chatId, `fail mid-stream ${chatId}`);
  const errors = [];
  let message;
  for await (const snapshot of readUIMessageStream({ stream, onError: e => errors.push(e.message) })) {
    message = snapshot;
  }
  assert.deepEqual(errors, ['An error occurred.']);
  assert.equal(textOf(message), 'Partial answer');
  checkInterrupted(message, 'error', 'client');

  const stored = await history(chatId, 'upstream');
  assert.equal(stored[1].id, message.id);
  checkInterrupted(stored[1], 'error', 'history');
  assert.equal(textOf(stored[1]), 'Partial answer');
});
