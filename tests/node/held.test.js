// A stream held for an approval: the ai package's Chat, reloaded from the
// stored history while its turn waits for approval, resumes the stream
// (resumeStream, as useChat({resume: true}) does on mount); the gateway
// holds it open with keep-alive comments until an approver decides
// through POST /v1/approvals/{id}, then streams the resumed turn into the
// same assistant message.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';
import { Chat, baseURL, chatAPI, history, partsOfType, textOf, uniqueId } from './gateway.js';

// until polls cond until it holds, failing after a generous deadline.
async function until(what, cond) {
  for (let i = 0; i < 2000; i++) {
    if (cond()) return;
    await new Promise(r => setTimeout(r, 10));
  }
  assert.fail(`never: ${what}`);
}

// watchingFetch counts the POSTs and the keep-alive comments of the GET
// streams it passes through.
function watchingFetch() {
  const seen = { posts: 0, keepAlives: 0, gets: [] };
  const fetchFn = async (url, init) => {
    if (init?.method === 'POST') seen.posts++;
    const res = await fetch(url, init);
    if (init?.method !== 'GET' || !res.body) return res;
    seen.gets.push(res.status);
    const decoder = new TextDecoder();
    const counted = res.body.pipeThrough(
      new TransformStream({
        transform(bytes, controller) {
          seen.keepAlives += decoder.decode(bytes, { stream: true }).split(': keep-alive\n').length - 1;
          controller.enqueue(bytes);
        },
      }),
    );
    return new Response(counted, { status: res.status, headers: res.headers });
  };
  return { seen, fetchFn };
}

test('a resumed stream held for an approval shows the resumed turn', async () => {
  const id = uniqueId('held');
  const first = new Chat({ id, transport: new DefaultChatTransport({ api: chatAPI }) });
  await first.sendMessage({ text: 'remove held.txt' });
  assert.equal(first.error, undefined, `chat error: ${first.error?.message}`);
  const waiting = first.messages.at(-1);
  const [asked] = partsOfType(waiting, 'tool-remove');
  assert.equal(asked?.state, 'approval-requested', `part: ${JSON.stringify(asked)}`);

  // The page is reloaded: a new Chat from the stored history resumes.
  const { seen, fetchFn } = watchingFetch();
  const finishes = [];
  const chat = new Chat({
    id,
    messages: await history(id),
    transport: new DefaultChatTransport({ api: chatAPI, fetch: fetchFn }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    onFinish: ({ message, finishReason, isError }) => finishes.push({ id: message.id, finishReason, isError }),
  });
  const resumed = chat.resumeStream();
  const heldPart = () => partsOfType(chat.messages.at(-1), 'tool-remove')[0];
  await until('the held stream replays the waiting message and keeps alive', () =>
    chat.status === 'streaming' && heldPart()?.state === 'approval-requested' && seen.keepAlives >= 2);
  assert.deepEqual(seen.gets, [200]);
  assert.equal(chat.messages.length, 2, `messages: ${JSON.stringify(chat.messages)}`);
  assert.equal(heldPart().approval.id, asked.approval.id);
  assert.equal(heldPart().approval.requestReason, 'removes a file');

  // An approver decides through the API; the held stream resumes.
  const res = await fetch(`${baseURL}/v1/approvals/${asked.approval.id}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ approved: true, reason: 'approved by ops' }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  await resumed;

  assert.equal(chat.error, undefined, `chat error: ${chat.error?.message}`);
  assert.equal(chat.status, 'ready');
  assert.equal(chat.messages.length, 2, `messages: ${JSON.stringify(chat.messages)}`);
  const assistant = chat.messages.at(-1);
  assert.equal(assistant.id, waiting.id, 'the resumed turn continues the waiting message');
  const [done] = partsOfType(assistant, 'tool-remove');
  assert.equal(done.state, 'output-available', `part: ${JSON.stringify(done)}`);
  assert.equal(done.approval.approved, true);
  assert.equal(done.approval.reason, 'approved by ops');
  assert.match(textOf(assistant), /Removing held\.txt\..*Remove said: .*"deleted":"held\.txt"/s);
  assert.deepEqual(finishes.map(f => [f.id, f.finishReason, f.isError]), [[waiting.id, 'stop', false]]);
  assert.equal(seen.posts, 0, 'the resumed stream made the client resubmit');

  const stored = await history(id);
  assert.equal(stored.length, 2);
  assert.equal(partsOfType(stored[1], 'tool-remove')[0].state, 'output-available');
});
