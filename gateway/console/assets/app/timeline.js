// timeline.js: one turn's hooks (GET /v1/admin/decisions?turn=ID&order=asc)
// drawn in the order of the reference's execution-order diagram: beforeTurn
// and its overrides; then, inside the model's stream, each step's
// beforeStep and its overrides, the model's chunks, each tool call's
// beforeToolCall and decision, the tool's execution, toolResult and
// afterToolCall, and onStepFinish; then the turn's end (beforePersist,
// onChatError, onChatResponse) and its stop reason.
//
// The order comes from the records' step numbers and each hook's place in
// a step, not from their times: records of one turn can carry the same
// time, parallel tool calls interleave, and the store may hand them over
// in another order. Times and record ids only break the remaining ties.
import { h, mount, time } from '/console/static/dom.js';
import { api, query } from './api.js';
import { outcome } from './decisions.js';

// maxRecords bounds the records one timeline fetches (pages of 500).
const maxRecords = 5000;

export async function render(main, { arg, params }) {
  const turn = arg || params.get('turn') || '';
  const input = h('input', { id: 'turn-id', placeholder: 'request id of the turn', value: turn });
  const form = h('form', { class: 'card filters', onsubmit: (ev) => { ev.preventDefault(); location.hash = '#/turn/' + encodeURIComponent(input.value.trim()); } },
    h('label', {}, h('span', {}, 'Turn'), input), h('button', { type: 'submit' }, 'Show'));
  mount(main, h('h1', {}, 'Turn timeline'), form);
  if (!turn) { main.append(h('p', { class: 'muted' }, 'Pick a turn: its request id, or "turn" on a decision.')); return; }
  const ds = [];
  let cursor = '';
  do {
    const page = await api('GET', '/v1/admin/decisions' + query({ turn, order: 'asc', limit: 500, cursor }));
    ds.push(...(page.decisions || []));
    cursor = page.next || '';
  } while (cursor && ds.length < maxRecords);
  if (!ds.length) { main.append(h('p', { class: 'muted', id: 'no-decisions' }, 'No decision recorded for this turn.')); return; }
  const t = group(ds);
  const stop = stopReason(t);
  main.append(h('section', { class: 'card' },
    h('p', {}, 'Session ', h('code', {}, ds[0].session), ' · agent ', ds[0].agent, ' · ', String(ds.length), ' records',
      cursor ? ' (the first ' + ds.length + ')' : ''),
    h('ol', { class: 'timeline', id: 'timeline' },
      t.before.map(item),
      t.steps.length ? h('li', { class: 'stream' }, h('span', { class: 'phase' }, 'model stream'),
        h('ol', {}, t.steps.map(stepItems))) : null,
      t.end.map(item)),
    stop ? h('p', { id: 'stop' }, h('strong', {}, 'Stop reason: '), stop) : null));
}

// Each hook's place: its phase in the turn (before the steps, in a step,
// after them) and its rank there; a tool call's hooks rank within the
// call. Hooks the table does not know go last in their phase.
const beforeSteps = { beforeTurn: 0 };
const inStep = { beforeStep: 0, beforeToolCall: 1, toolResult: 1, afterToolCall: 1, onStepFinish: 2 };
const inCall = { beforeToolCall: 0, toolResult: 1, afterToolCall: 2 };
// onChatError has no step number: a failure's record goes with the end.
const afterSteps = { beforePersist: 0, onChatError: 1, onChatResponse: 2 };

// stepOf is the step a record belongs to: its step column, or its record's.
function stepOf(d) {
  const r = d.record || {};
  for (const v of [d.step, r.stepNumber]) if (typeof v === 'number') return v;
  return null;
}

// earlier orders two records of one place by time, then by record id.
function earlier(a, b) {
  const ta = Date.parse(a.time), tb = Date.parse(b.time);
  if (ta !== tb && !isNaN(ta) && !isNaN(tb)) return ta - tb;
  return Number(a.id) - Number(b.id);
}

// group places the records of a turn: {before, steps: [{n, head, calls:
// [{id, records}], tail}], end}, each list in execution order.
export function group(ds) {
  const t = { before: [], steps: [], end: [] };
  const steps = new Map();
  const stepN = (n) => {
    if (!steps.has(n)) steps.set(n, { n, head: [], calls: new Map(), tail: [] });
    return steps.get(n);
  };
  let last = -1;
  for (const d of ds) { const s = stepOf(d); if (s !== null) last = Math.max(last, s); }
  for (const d of ds) {
    let s = stepOf(d);
    if (d.hook in beforeSteps) { t.before.push(d); continue; }
    // A beforeStep without a step number stopped the turn at the next
    // step boundary (a used-up quota): the step that did not run.
    if (s === null && d.hook === 'beforeStep') s = last + 1;
    if (s === null) { t.end.push(d); continue; }
    const st = stepN(s);
    if (d.hook in inCall) {
      const id = d.toolCallId || (d.record || {}).toolCallId || '';
      if (!st.calls.has(id)) st.calls.set(id, { id, records: [] });
      st.calls.get(id).records.push(d);
    } else if (d.hook === 'beforeStep') st.head.push(d);
    else st.tail.push(d);
  }
  const rank = (table) => (a, b) => ((table[a.hook] ?? 99) - (table[b.hook] ?? 99)) || earlier(a, b);
  t.before.sort(rank(beforeSteps));
  t.end.sort(rank(afterSteps));
  t.steps = [...steps.values()].sort((a, b) => a.n - b.n).map(st => {
    const calls = [...st.calls.values()];
    for (const c of calls) c.records.sort(rank(inCall));
    // A call is placed by its first hook (beforeToolCall when recorded).
    calls.sort((a, b) => earlier(a.records[0], b.records[0]));
    st.head.sort(earlier);
    st.tail.sort(rank(inStep));
    return { n: st.n, head: st.head, calls, tail: st.tail };
  });
  return t;
}

// order is the turn's records in the order the timeline draws them.
export function order(ds) {
  const t = group(ds);
  return [...t.before, ...t.steps.flatMap(s => [...s.head, ...s.calls.flatMap(c => c.records), ...s.tail]), ...t.end];
}

// stepItems draws one step: its beforeStep, the model's chunks, its tool
// calls (decision, execution, result) and onStepFinish.
function stepItems(st) {
  const finish = st.tail.find(d => d.hook === 'onStepFinish');
  const fr = finish ? (finish.record || {}) : {};
  return h('li', { class: 'step', dataset: { step: String(st.n) } },
    h('span', { class: 'phase' }, 'step ', String(st.n), fr.model ? ' · ' + fr.model : ''),
    h('ol', {},
      st.head.map(item),
      h('li', { class: 'chunks muted' }, 'onChunk … the model streams (chunks are not recorded)'),
      st.calls.map(c => h('li', { class: 'call', dataset: { toolCallId: c.id } },
        h('ol', {}, c.records.flatMap(d => d.hook === 'beforeToolCall' ? [item(d), execution(c)] : [item(d)])))),
      st.tail.map(item)));
}

// execution says whether the call's tool ran, from its afterToolCall.
function execution(c) {
  const after = c.records.find(d => d.hook === 'afterToolCall');
  if (!after) return h('li', { class: 'exec muted' }, '→ no afterToolCall recorded (the call waits, or the turn ended)');
  const r = after.record || {};
  if (!r.executed) return h('li', { class: 'exec' }, '→ the tool did not run (', r.decision || 'not executed', ')');
  return h('li', { class: 'exec' }, '→ tool executes',
    typeof r.durationMs === 'number' ? ` (${r.durationMs} ms)` : '', r.success ? '' : ': failed');
}

// item draws one record: hook, tool, outcome, rules fired, what it says.
function item(d) {
  const data = { hook: d.hook, id: d.id };
  if (d.toolCallId) data.toolCallId = d.toolCallId;
  return h('li', { class: 'hook ' + d.hook, dataset: data },
    h('span', { class: 'hookname' }, d.hook),
    d.tool ? [h('code', {}, d.tool), ' '] : null,
    d.outcome ? [outcome(d.outcome, d.shadowChanged), ' '] : null,
    (d.rulesFired || []).map(r => h('code', { class: 'rule' }, r)), ' ',
    details(d), ' ',
    h('a', { href: '#/decision/' + encodeURIComponent(d.id) }, 'record'), ' ', time(d.time));
}

// details says in a few words what the record decided or observed.
function details(d) {
  const r = d.record || {};
  switch (d.hook) {
    case 'beforeTurn':
    case 'beforeStep':
      return overrides(r.decision);
    case 'beforeToolCall': {
      const dec = r.decision || {};
      return h('span', { class: 'decision' }, 'decision ', outcome(d.action || dec.action || 'allow'),
        dec.reason ? ' ' + dec.reason : '', (dec.approvals || []).map(a => ' · approval: ' + (a.reason || '')));
    }
    case 'toolResult':
      return r.decision ? overrides(r.decision) : h('span', { class: 'muted' }, 'result unchanged');
    case 'afterToolCall':
      return h('span', { class: 'result' }, r.success ? outcome('succeeded') : outcome('error'),
        r.success ? ` ${r.outputBytes || 0} bytes of output` : r.error ? ' ' + r.error : '');
    case 'onStepFinish': {
      const u = r.usage || {};
      return h('span', { class: 'muted' }, `finish ${r.finishReason || '—'} · ${r.toolCallCount || 0} tool calls · ` +
        `${u.inputTokens || 0} in / ${u.outputTokens || 0} out tokens`);
    }
    case 'onChatError':
      return h('span', {}, r.errorClass ? ['class ', h('code', {}, r.errorClass), ' '] : null, overrides(r.decision));
    case 'onChatResponse':
      return h('span', {}, outcome(r.status || '—'), ` ${r.steps || 0} steps`, r.finishReason ? ' · finish ' + r.finishReason : '',
        r.error ? ' · ' + r.error : '');
  }
  return overrides(r.decision);
}

// overrides lists what a decision sets, field by field.
function overrides(dec) {
  if (!dec || typeof dec !== 'object') return h('span', { class: 'muted' }, 'no overrides');
  const keys = Object.keys(dec).filter(k => dec[k] !== null && dec[k] !== undefined);
  if (!keys.length) return h('span', { class: 'muted' }, 'no overrides');
  return h('span', { class: 'overrides' }, 'sets ', keys.map((k, i) => [i ? ', ' : '', h('code', {}, k), ' = ', brief(dec[k])]));
}

// brief is a value in at most 80 characters.
function brief(v) {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s.length > 80 ? s.slice(0, 79) + '…' : s;
}

// stopReason is why the turn ended: onChatResponse's finish reason and
// status, or a step boundary's stop (a used-up quota).
function stopReason(t) {
  const parts = [];
  for (const s of t.steps) for (const d of s.head) {
    const stop = ((d.record || {}).decision || {}).stop;
    if (stop) parts.push(typeof stop === 'string' ? stop : 'stopped by ' + (d.rulesFired || []).join(', '));
  }
  const end = t.end.find(d => d.hook === 'onChatResponse');
  if (end) {
    const r = end.record || {};
    parts.unshift([r.finishReason || r.status, r.finishReason && r.status ? ` (${r.status}, ${r.steps || 0} steps)` : ''].join(''));
  }
  return parts.filter(Boolean).join(' · ');
}
