// The Chat machinery useChat wraps (AbstractChat from ai), with a
// client-side tool: onToolCall → addToolOutput, then the automatic
// continuation of sendAutomaticallyWhen.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from 'ai';
import { Chat, chatAPI, history, partsOfType, textOf, uniqueId } from './gateway.js';

// maxPosts bounds the requests one conversation may make: a gateway that
// provokes the automatic resubmission loop (protocols.md A.8) gets an error
// response instead of being hit without end.
const maxPosts = 6;

// countingFetch counts the POSTs and their bodies, refusing any beyond
// maxPosts.
function countingFetch() {
  const posts = [];
  const fetchFn = async (url, init) => {
    if (init?.method === 'POST') {
      posts.push(JSON.parse(init.body));
      if (posts.length > maxPosts) {
        return new Response('resubmission loop: too many requests', { status: 429 });
      }
    }
    return fetch(url, init);
  };
  return { posts, fetchFn };
}

test('a client tool output continues the same assistant message once', async () => {
  const { posts, fetchFn } = countingFetch();
  const finishes = [];
  const toolCalls = [];
  const chat = new Chat({
    id: uniqueId('chat'),
    transport: new DefaultChatTransport({ api: chatAPI, fetch: fetchFn }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    onToolCall: ({ toolCall }) => {
      toolCalls.push(toolCall);
      if (toolCall.toolName === 'getLocation') {
        // Not awaited, as the ai docs require inside onToolCall.
        chat.addToolOutput({ tool: 'getLocation', toolCallId: toolCall.toolCallId, output: { city: 'Berlin' } });
      }
    },
    onFinish: ({ message, finishReason, isError }) => finishes.push({ id: message.id, finishReason, isError }),
  });

  await chat.sendMessage({ text: 'Where am I?' });

  assert.equal(chat.error, undefined, `chat error: ${chat.error?.message}`);
  assert.equal(chat.status, 'ready');
  assert.equal(posts.length, 2, `want the first request and one automatic continuation, got ${posts.length}`);
  assert.equal(posts[1].trigger, 'submit-message');
  assert.equal(posts[1].messageId, posts[1].messages.at(-1).id, 'the continuation names the assistant message');

  assert.deepEqual(toolCalls.map(c => c.toolName), ['getLocation']);
  assert.equal(chat.messages.length, 2, `messages: ${JSON.stringify(chat.messages)}`);
  const [user, assistant] = chat.messages;
  assert.equal(user.role, 'user');
  assert.equal(assistant.role, 'assistant');
  assert.deepEqual(finishes.map(f => f.id), [assistant.id, assistant.id], 'both responses continue one message');
  assert.deepEqual(finishes.map(f => f.finishReason), ['tool-calls', 'stop']);

  const [tool] = partsOfType(assistant, 'tool-getLocation');
  assert.ok(tool, `no tool-getLocation part in ${JSON.stringify(assistant.parts)}`);
  assert.equal(tool.state, 'output-available');
  assert.deepEqual(tool.output, { city: 'Berlin' });
  assert.match(textOf(assistant), /Let me ask your device\./);
  assert.match(textOf(assistant), /You are in .*Berlin/);

  const stored = await history(chat.id);
  assert.equal(stored.length, 2);
  assert.equal(stored[1].id, assistant.id);
  const [storedTool] = partsOfType(stored[1], 'tool-getLocation');
  assert.deepEqual(storedTool.output, { city: 'Berlin' }, 'the gateway did not store the client tool output');
});

test('a server tool turn does not make Chat resubmit', async () => {
  const { posts, fetchFn } = countingFetch();
  const chat = new Chat({
    id: uniqueId('chat'),
    transport: new DefaultChatTransport({ api: chatAPI, fetch: fetchFn }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
  });

  await chat.sendMessage({ text: 'weather in Rome' });

  assert.equal(chat.error, undefined, `chat error: ${chat.error?.message}`);
  assert.equal(posts.length, 1, 'a turn that ends with text must not trigger an automatic continuation');
  const assistant = chat.messages.at(-1);
  assert.equal(partsOfType(assistant, 'tool-weather')[0]?.state, 'output-available');
  assert.match(textOf(assistant), /Here is the weather: .*Rome/);
});

// approvalChat is a Chat that resubmits on its own once every approval of
// the last step is answered (addToolApprovalResponse).
function approvalChat(fetchFn, finishes) {
  return new Chat({
    id: uniqueId('chat'),
    transport: new DefaultChatTransport({ api: chatAPI, fetch: fetchFn }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    onFinish: ({ message, finishReason, isError }) => finishes.push({ id: message.id, finishReason, isError }),
  });
}

// waitReady resolves when the chat has no request in flight.
async function waitReady(chat) {
  for (let i = 0; i < 500 && chat.status !== 'ready' && chat.status !== 'error'; i++) {
    await new Promise(r => setTimeout(r, 10));
  }
}

for (const { approved, state, reason, said } of [
  { approved: true, state: 'output-available', reason: 'go ahead', said: /Remove said: .*"deleted":"notes\.txt"/ },
  { approved: false, state: 'output-denied', reason: 'keep it', said: /Remove said: This tool call was not approved, so it did not run\. Reason: keep it/ },
]) {
  test(`a tool call waits for approval and runs once ${approved ? 'approved' : 'denied'}`, async () => {
    const { posts, fetchFn } = countingFetch();
    const finishes = [];
    const chat = approvalChat(fetchFn, finishes);

    await chat.sendMessage({ text: 'remove notes.txt' });
    assert.equal(chat.error, undefined, `chat error: ${chat.error?.message}`);
    assert.equal(posts.length, 1);
    const waiting = chat.messages.at(-1);
    const [asked] = partsOfType(waiting, 'tool-remove');
    assert.equal(asked?.state, 'approval-requested', `part: ${JSON.stringify(asked)}`);
    assert.equal(asked.approval.requestReason, 'removes a file');
    assert.deepEqual(finishes.map(f => f.finishReason), ['tool-calls']);

    await chat.addToolApprovalResponse({ id: asked.approval.id, approved, reason });
    await waitReady(chat);

    assert.equal(chat.error, undefined, `chat error: ${chat.error?.message}`);
    assert.equal(posts.length, 2, `want one automatic resubmission, got ${posts.length}`);
    assert.equal(posts[1].messageId, waiting.id, 'the resubmission names the assistant message');
    assert.equal(chat.messages.length, 2, `messages: ${JSON.stringify(chat.messages)}`);
    const assistant = chat.messages.at(-1);
    assert.equal(assistant.id, waiting.id, 'the answer continues the same message');
    const [done] = partsOfType(assistant, 'tool-remove');
    assert.equal(done.state, state, `part: ${JSON.stringify(done)}`);
    assert.equal(done.approval.approved, approved);
    assert.match(textOf(assistant), said);
    assert.deepEqual(finishes.map(f => f.finishReason), ['tool-calls', 'stop']);

    const stored = await history(chat.id);
    assert.equal(stored.length, 2);
    const [storedPart] = partsOfType(stored[1], 'tool-remove');
    assert.equal(storedPart.state, state);
    assert.equal(storedPart.approval.approved, approved);
  });
}
