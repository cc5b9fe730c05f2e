// Shared helpers of the client suite: where the gateway runs and fresh ids.
// TURNGATE_URL is set by the Go test that starts the gateway
// (tests/node_test.go, with tests/testdata/node/turngate.yaml).
import assert from 'node:assert/strict';
import { AbstractChat } from 'ai';

export const baseURL = process.env.TURNGATE_URL;
if (!baseURL) {
  throw new Error(
    'TURNGATE_URL is not set: run this suite with `go test ./tests -run TestNodeClients`, ' +
      'or set it to a gateway serving tests/testdata/node/turngate.yaml',
  );
}

// agent is the agent the suite talks to; OpenAI clients name it as the model.
export const agent = 'demo';

// chatAPI is the UI message stream endpoint DefaultChatTransport posts to.
export const chatAPI = `${baseURL}/v1/agents/${agent}/chat`;

let counter = 0;

// uniqueId returns an id no other test of this run uses.
export function uniqueId(prefix) {
  counter += 1;
  return `${prefix}-${process.pid}-${counter}`;
}

// userMessage is a user UIMessage as the ai package's Chat builds one.
export function userMessage(text) {
  return { id: uniqueId('user'), role: 'user', parts: [{ type: 'text', text }] };
}

// history returns the messages the gateway stored for a session (of the
// demo agent unless another is named).
export async function history(sessionId, agentName = agent) {
  const res = await fetch(`${baseURL}/v1/agents/${agentName}/sessions/${sessionId}/messages`);
  assert.equal(res.status, 200, `GET history: ${await res.clone().text()}`);
  return (await res.json()).messages;
}

// partsOfType returns a message's parts of one type.
export function partsOfType(message, type) {
  return message.parts.filter(p => p.type === type);
}

// textOf joins a message's text parts.
export function textOf(message) {
  return partsOfType(message, 'text')
    .map(p => p.text)
    .join('');
}

// NodeChatState is the minimal in-memory ChatState, as @ai-sdk/react's Chat
// keeps it (chat.react.ts) minus the React subscriptions.
class NodeChatState {
  status = 'ready';
  error = undefined;
  messages;

  constructor(messages = []) {
    this.messages = messages;
  }

  pushMessage = message => {
    this.messages = this.messages.concat(message);
  };

  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };

  replaceMessage = (index, message) => {
    this.messages = [
      ...this.messages.slice(0, index),
      this.snapshot(message),
      ...this.messages.slice(index + 1),
    ];
  };

  snapshot = thing => structuredClone(thing);
}

// Chat is what useChat instantiates, without React (chat.test.js,
// files.test.js).
export class Chat extends AbstractChat {
  constructor({ messages, ...init }) {
    super({ ...init, state: new NodeChatState(messages) });
  }

  get messages() {
    return this.state.messages;
  }
}
