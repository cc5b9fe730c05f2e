// The AI SDK peer of the load program's turn (go run ./tests/load -mode
// peer-compare): the ai package's streamText on a scripted mock model, with
// the turn's rules written as code hooks the way an application on the SDK
// writes them (see /work/shared/reference/think-implementation.md §2):
//
//   - beforeTurn: the 5 beforeTurn rules of internal/benchrules' CEL file
//     (tenant budgets), before streamText;
//   - prepareStep: its 5 beforeStep rules (active tools by step and model);
//   - a beforeToolCall wrapper around every tool's execute: the 20 rules of
//     benchrules' Rego policy, a search clamp from data (limit 80 → 50),
//     blocks by tool and mode, tenant allow-lists, per-tool clamps;
//   - onChunk and onStepFinish: observers counting parts and steps.
//
// The model streams what the load program's scripted model streams: step 0
// is text-start, CHUNKS text deltas of CHUNK_SIZE characters, text-end, the
// search call's input in deltas, the call {"query":"turngate","limit":80}
// and finish; step 1 (after the tool result) text and finish; CHUNK_DELAY_MS
// between parts. Sessions live in memory (a Map of UI messages), so the peer
// does no disk I/O and writes no decision records: the comparison favours
// it.
//
// It serves POST /v1/agents/:agent/chat (the DefaultChatTransport body: the
// session id and its new user message) with a UI message stream, and GET
// /readyz. Listens on 127.0.0.1:$PORT; prints "listening" when ready.
import http from 'node:http';
import { jsonSchema, streamText, stepCountIs, tool, convertToModelMessages } from 'ai';
import { MockLanguageModelV4, simulateReadableStream } from 'ai/test';

const env = (name, def) => (process.env[name] === undefined ? def : Number(process.env[name]));
const CHUNKS = env('CHUNKS', 40);
const CHUNK_SIZE = env('CHUNK_SIZE', 16);
const CHUNK_DELAY_MS = env('CHUNK_DELAY_MS', 1);
const PORT = env('PORT', 0);
const REGO_RULES = 20;
const CEL_RULES = 10;

const benchText = 'The gateway relays every chunk of this reply to the client as one UI message stream event. ';
const text = benchText.repeat(Math.ceil((CHUNKS * CHUNK_SIZE) / benchText.length) + 1).slice(0, CHUNKS * CHUNK_SIZE);
const searchInput = JSON.stringify({ query: 'turngate', limit: 80 });

function cut(s) {
  const out = [];
  for (let i = 0; i < s.length; i += CHUNK_SIZE) out.push(s.slice(i, i + CHUNK_SIZE));
  return out;
}

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: CHUNKS, text: CHUNKS, reasoning: 0 },
};

// stepParts is the scripted reply to a prompt: a search call unless the
// last message is the tool's result.
let callSeq = 0;
function stepParts(prompt) {
  const last = prompt[prompt.length - 1];
  const parts = [{ type: 'stream-start', warnings: [] }, { type: 'text-start', id: 't0' }];
  for (const d of cut(text)) parts.push({ type: 'text-delta', id: 't0', delta: d });
  parts.push({ type: 'text-end', id: 't0' });
  if (last && last.role === 'tool') {
    parts.push({ type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage });
    return parts;
  }
  const id = `call_${++callSeq}`;
  parts.push({ type: 'tool-input-start', id, toolName: 'search' });
  for (const d of cut(searchInput)) parts.push({ type: 'tool-input-delta', id, delta: d });
  parts.push({ type: 'tool-input-end', id });
  parts.push({ type: 'tool-call', toolCallId: id, toolName: 'search', input: searchInput });
  parts.push({ type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage });
  return parts;
}

const model = new MockLanguageModelV4({
  provider: 'scripted',
  modelId: 'bench',
  doStream: async ({ prompt }) => ({
    stream: simulateReadableStream({ chunks: stepParts(prompt), initialDelayInMs: null, chunkDelayInMs: CHUNK_DELAY_MS }),
  }),
});

// The rules' data, as benchrules.Rego's data document.
const data = { limits: { search: 50 }, allowed: {} };
for (let i = 0; i < REGO_RULES; i++) data.allowed[`tool_${i}`] = ['acme', 'globex'];

// toolCallRules are benchrules.Rego's rules as code: each returns a block
// reason or a patch of the input's limit, or nothing.
const toolCallRules = [
  (c) => (c.tool === 'search' && c.input.limit > data.limits.search ? { limit: data.limits.search } : undefined),
];
for (let i = 1; i < REGO_RULES; i++) {
  const name = `tool_${i}`;
  switch (i % 3) {
    case 0:
      toolCallRules.push((c) => (c.tool === name && c.body.mode === 'read-only' ? `${name} is disabled in read-only mode` : undefined));
      break;
    case 1:
      toolCallRules.push((c) => (c.tool === name && !data.allowed[name].includes(c.tenant) ? `tenant may not call ${name}` : undefined));
      break;
    case 2:
      toolCallRules.push((c) => (c.tool === name && c.input.limit > i ? { limit: i } : undefined));
      break;
  }
}

// beforeToolCall decides a call: block with the reasons, allow with the
// patched input, or allow.
function beforeToolCall(c) {
  const reasons = [];
  let patch;
  for (const rule of toolCallRules) {
    const r = rule(c);
    if (typeof r === 'string') reasons.push(r);
    else if (r) patch = { ...patch, ...r };
  }
  if (reasons.length) return { action: 'block', reason: reasons.sort().join('; ') };
  if (patch) return { action: 'allow', input: { ...c.input, ...patch } };
  return { action: 'allow' };
}

// withDecision wraps every tool's execute with beforeToolCall, as Think's
// _wrapToolsWithDecision does.
function withDecision(tools, turn) {
  const out = {};
  for (const [name, t] of Object.entries(tools)) {
    out[name] = {
      ...t,
      execute: async (input, options) => {
        const d = beforeToolCall({ tool: name, input, tenant: turn.tenant, body: turn.body });
        if (d.action === 'block') return d.reason;
        return t.execute(d.input ?? input, options);
      },
    };
  }
  return out;
}

const tools = {
  search: tool({
    description: 'Search the demo corpus.',
    inputSchema: jsonSchema({
      type: 'object',
      properties: { query: { type: 'string' }, limit: { type: 'integer' } },
      required: ['query'],
    }),
    // The gateway's demo search: the limit it was called with, at most 3 results.
    execute: async ({ query, limit }) => {
      const n = limit > 0 ? Math.min(limit, 3) : 3;
      const results = [];
      for (let i = 1; i <= n; i++) results.push({ title: `Result ${i} for ${query}`, url: `https://example.com/search/${i}` });
      return { query, limit, results };
    },
  }),
};

// beforeTurn is benchrules.CEL's beforeTurn rules: a tenant's step budget.
function beforeTurn(turn) {
  for (let i = 0; i < CEL_RULES; i += 2) {
    if (turn.tenant === `tenant_${i}` && turn.maxSteps > i + 2) turn.maxSteps = 3;
  }
}

// prepareStep is benchrules.CEL's beforeStep rules: active tools by step.
function prepareStep({ stepNumber, model: m }) {
  for (let i = 1; i < CEL_RULES; i += 2) {
    if (stepNumber > i + 10 && m.modelId === `model_${i}`) return { activeTools: ['weather'] };
  }
  return undefined;
}

const sessions = new Map();
const stats = { chunks: 0, steps: 0 };

async function chat(req, res) {
  let body = '';
  for await (const c of req) body += c;
  let msg;
  try {
    msg = JSON.parse(body);
  } catch {
    res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"bad JSON"}');
    return;
  }
  const history = sessions.get(msg.id) ?? [];
  const messages = [...history, ...msg.messages];
  const turn = { tenant: 'acme', maxSteps: 4, body: { mode: 'read-write' } };
  beforeTurn(turn);
  const result = streamText({
    model,
    system: "You are turngate's load-test agent.",
    messages: await convertToModelMessages(messages),
    tools: withDecision(tools, turn),
    stopWhen: stepCountIs(turn.maxSteps),
    prepareStep,
    onChunk: () => {
      stats.chunks++;
    },
    onStepFinish: () => {
      stats.steps++;
    },
  });
  result.pipeUIMessageStreamToResponse(res, {
    originalMessages: messages,
    onFinish: ({ messages: all }) => {
      sessions.set(msg.id, all);
    },
  });
}

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/readyz') {
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ready\n');
    return;
  }
  if (req.method === 'POST' && /^\/v1\/agents\/[^/]+\/chat$/.test(req.url)) {
    chat(req, res).catch((err) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(err));
    });
    return;
  }
  res.writeHead(404).end();
});
server.keepAliveTimeout = 60_000;
server.listen(PORT, '127.0.0.1', () => {
  console.log(`listening on 127.0.0.1:${server.address().port}`);
});
