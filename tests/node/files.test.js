// File parts as useChat sends an upload: sendMessage({text, files}) with a
// FileUIPart array (what a FileList becomes in the browser).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DefaultChatTransport } from 'ai';
import { Chat, chatAPI, history, partsOfType, textOf, uniqueId } from './gateway.js';

// A 1x1 PNG and a one-line PDF as data: URLs, as FileReader.readAsDataURL writes them.
const png = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg==';
const pdf = 'data:application/pdf;base64,JVBERi0xLjQKJSVFT0YK';

test('a file sent with sendMessage is stored as sent and the turn runs', async () => {
  const posts = [];
  const chat = new Chat({
    id: uniqueId('chat'),
    transport: new DefaultChatTransport({
      api: chatAPI,
      fetch: async (url, init) => {
        posts.push(JSON.parse(init.body));
        return fetch(url, init);
      },
    }),
  });
  const file = { type: 'file', mediaType: 'image/png', url: png, filename: 'dot.png' };

  await chat.sendMessage({ text: 'weather in Rome', files: [file] });

  assert.equal(chat.error, undefined, `chat error: ${chat.error?.message}`);
  assert.deepEqual(partsOfType(posts[0].messages.at(-1), 'file'), [file], 'the client sends the file part');
  assert.match(textOf(chat.messages.at(-1)), /Here is the weather: .*Rome/);
  const stored = await history(chat.id);
  assert.equal(stored.length, 2);
  assert.deepEqual(partsOfType(stored[0], 'file'), [file], 'the history returns the file part as sent');
  assert.deepEqual(partsOfType(stored[0], 'text').map(p => p.text), ['weather in Rome']);
});

test('a file a rule refuses ends the turn with its reason', async () => {
  const chat = new Chat({ id: uniqueId('chat'), transport: new DefaultChatTransport({ api: chatAPI }) });

  await chat.sendMessage({ text: 'weather in Rome', files: [{ type: 'file', mediaType: 'application/pdf', url: pdf, filename: 'a.pdf' }] });

  assert.equal(chat.status, 'error');
  assert.equal(chat.error?.message, 'PDF files are not accepted here.');
  const stored = await history(chat.id);
  assert.equal(stored.length, 1, 'the user message is stored, no answer');
  assert.equal(partsOfType(stored[0], 'file')[0].mediaType, 'application/pdf');
});

test('a malformed file is a 400 the client reports', async () => {
  const chat = new Chat({ id: uniqueId('chat'), transport: new DefaultChatTransport({ api: chatAPI }) });

  await chat.sendMessage({ text: 'look', files: [{ type: 'file', mediaType: 'image/png', url: 'data:image/png;base64,!!!!' }] });

  assert.equal(chat.status, 'error');
  assert.match(chat.error?.message ?? '', /invalid_attachment/);
});
