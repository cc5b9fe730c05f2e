// WebSocketChatTransport, the ai package's WebSocket transport, with the ws
// package as Node's WebSocket, against GET /v1/agents/{agent}/ws: turns,
// a client tool with Chat's automatic continuation, resume and abort.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AbstractChat,
  WebSocketChatTransport,
  lastAssistantMessageIsCompleteWithToolCalls,
  readUIMessageStream,
} from 'ai';
import WebSocket from 'ws';
import { agent, baseURL, history, partsOfType, textOf, uniqueId, userMessage } from './gateway.js';

// transport opens a WebSocketChatTransport to agentName; the test closes it.
function transport(t, agentName = agent, options = {}) {
  const tr = new WebSocketChatTransport({
    url: `${baseURL}/v1/agents/${agentName}/ws`,
    webSocket: WebSocket,
    ...options,
  });
  t.after(() => tr.close());
  return tr;
}

// open sends one user message and returns the response's chunk stream.
function open(tr, chatId, text, abortSignal) {
  return tr.sendMessages({
    chatId,
    messages: [userMessage(text)],
    trigger: 'submit-message',
    messageId: undefined,
    abortSignal,
  });
}

// assemble reads a chunk stream into the final assistant message; onMessage
// sees every snapshot.
async function assemble(stream, onMessage = () => {}) {
  const errors = [];
  let message;
  for await (const snapshot of readUIMessageStream({ stream, onError: e => errors.push(e) })) {
    message = snapshot;
    await onMessage(message);
  }
  assert.deepEqual(errors, [], 'the stream reported errors');
  assert.ok(message, 'the stream assembled no message');
  return message;
}

// storedAnswer polls a session's history until its assistant message
// satisfies done: the turn has ended and been persisted.
async function storedAnswer(chatId, agentName, done) {
  for (let i = 0; i < 400; i++) {
    const stored = await history(chatId, agentName);
    if (stored.length === 2 && done(stored[1])) {
      return stored[1];
    }
    await sleep(25);
  }
  assert.fail(`the turn of ${chatId} was not persisted`);
}

test('a text turn over WebSocket', async t => {
  const tr = transport(t);
  const chatId = uniqueId('ws-text');
  const message = await assemble(await open(tr, chatId, 'hello there'));
  assert.equal(textOf(message), 'Echo: hello there');
  const stored = await history(chatId);
  assert.equal(stored.length, 2);
  assert.equal(stored[1].id, message.id, 'the stored assistant message has another id than the streamed one');
});

test('a server tool turn over WebSocket, two on one connection', async t => {
  const tr = transport(t);
  const [paris, rome] = await Promise.all([
    open(tr, uniqueId('ws-tool'), 'What is the weather in Paris?').then(s => assemble(s)),
    open(tr, uniqueId('ws-tool'), 'What is the weather in Rome?').then(s => assemble(s)),
  ]);
  for (const [message, city] of [[paris, 'Paris'], [rome, 'Rome']]) {
    const [tool] = partsOfType(message, 'tool-weather');
    assert.ok(tool, `no tool-weather part in ${JSON.stringify(message.parts)}`);
    assert.equal(tool.state, 'output-available');
    assert.deepEqual(tool.input, { city });
    assert.equal(tool.output.city, city);
    assert.match(textOf(message), new RegExp(`Here is the weather: .*${city}`));
    assert.equal(partsOfType(message, 'step-start').length, 2);
  }
});

// NodeChatState is the minimal in-memory ChatState (as in chat.test.js).
class NodeChatState {
  status = 'ready';
  error = undefined;
  messages = [];
  pushMessage = message => {
    this.messages = this.messages.concat(message);
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index, message) => {
    this.messages = [...this.messages.slice(0, index), structuredClone(message), ...this.messages.slice(index + 1)];
  };
  snapshot = thing => structuredClone(thing);
}

class Chat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new NodeChatState() });
  }
  get messages() {
    return this.state.messages;
  }
}

test('a client tool output continues the message over the same WebSocket', async t => {
  const sends = [];
  const tr = transport(t, agent, {
    // Counts the send frames; returns nothing, so the frames are the default ones.
    prepareSendMessagesRequest: ({ trigger, messageId, messages }) => {
      sends.push({ trigger, messageId, last: messages.at(-1) });
      assert.ok(sends.length <= 4, 'automatic resubmission loop');
      return {};
    },
  });
  const chat = new Chat({
    id: uniqueId('ws-chat'),
    transport: tr,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    onToolCall: ({ toolCall }) => {
      if (toolCall.toolName === 'getLocation') {
        chat.addToolOutput({ tool: 'getLocation', toolCallId: toolCall.toolCallId, output: { city: 'Berlin' } });
      }
    },
  });

  await chat.sendMessage({ text: 'Where am I?' });
  // The continuation is sent after the first response has finished.
  for (let i = 0; i < 400 && (chat.status !== 'ready' || sends.length < 2); i++) {
    await sleep(25);
  }

  assert.equal(chat.error, undefined, `chat error: ${chat.error?.message}`);
  assert.equal(sends.length, 2, `want the first send and one automatic continuation, got ${sends.length}`);
  assert.equal(sends[1].messageId, sends[1].last.id, 'the continuation names the assistant message');
  assert.equal(chat.messages.length, 2, `messages: ${JSON.stringify(chat.messages)}`);
  const assistant = chat.messages[1];
  const [tool] = partsOfType(assistant, 'tool-getLocation');
  assert.equal(tool.state, 'output-available');
  assert.deepEqual(tool.output, { city: 'Berlin' });
  assert.match(textOf(assistant), /You are in .*Berlin/);

  const stored = await history(chat.id);
  assert.equal(stored[1].id, assistant.id);
  assert.deepEqual(partsOfType(stored[1], 'tool-getLocation')[0].output, { city: 'Berlin' });
});

test('resume replays the in-flight response on another connection', async t => {
  const chatId = uniqueId('ws-resume');
  const first = transport(t, 'slow');
  const stream = await open(first, chatId, 'tell me a long story');
  // Read until the story has begun, then leave that stream alone.
  const reader = stream.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    assert.ok(!done, 'the story ended before any text');
    if (value.type === 'text-delta') break;
  }

  const second = transport(t, 'slow');
  const replay = await second.reconnectToStream({ chatId });
  assert.ok(replay, 'no active stream to resume');
  const message = await assemble(replay);
  assert.match(textOf(message), /^Once upon a time/);
  assert.match(textOf(message), /final twist/);
  const stored = await history(chatId, 'slow');
  assert.equal(stored[1].id, message.id, 'the replay names another message than the stored one');
  assert.equal(textOf(stored[1]), textOf(message));

  assert.equal(await second.reconnectToStream({ chatId }), null, 'a resume after the turn should find nothing');
  reader.cancel().catch(() => {});
});

test('abort cancels the turn and its partial message is persisted', async t => {
  const tr = transport(t, 'slow');
  const chatId = uniqueId('ws-abort');
  const controller = new AbortController();
  const stream = await open(tr, chatId, 'tell me a long story', controller.signal);
  let seen = '';
  const message = await assemble(stream, m => {
    seen = textOf(m);
    if (seen.length > 0 && !controller.signal.aborted) {
      controller.abort();
    }
  });
  assert.ok(controller.signal.aborted, 'the stream ended before any text');
  assert.ok(!textOf(message).includes('final twist'));

  const stored = await storedAnswer(chatId, 'slow', m => m.metadata?.interrupted !== undefined);
  assert.equal(stored.metadata.interrupted, 'aborted');
  assert.ok(textOf(stored).startsWith(seen), `stored ${textOf(stored)}, client saw ${seen}`);
  assert.ok(!textOf(stored).includes('final twist'), 'the turn was not cut short');
});
