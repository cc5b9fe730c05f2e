// playground.js: one hook's input (from a recorded decision, or a template
// of the hook's context) evaluated against the live revision and a
// candidate side by side (POST /v1/admin/rules/eval), with the rules that
// fired and, where the engine can say, why the others did not.
import { h, mount, json, errorBox } from '/console/static/dom.js';
import { api } from './api.js';
import { editor } from './candidate.js';
import { outcome, firedRules } from './decisions.js';

const principal = { tenant: 'default', subject: 'alice', roles: [] };

// templates are a small context of each hook, in the shape
// `turngate eval` takes.
export const templates = {
  beforeToolCall: { type: 'tool-call', toolCallId: 'call_1', toolName: 'get_weather', input: { city: 'Lima' },
    tool: { name: 'get_weather', kind: 'http', description: 'Current weather of a city' },
    stepNumber: 0, agent: 'assistant', sessionId: 's1', requestId: 'r1', principal, messages: [], previousCalls: [] },
  toolResult: { type: 'tool-call', toolCallId: 'call_1', toolName: 'get_weather', input: { city: 'Lima' },
    tool: { name: 'get_weather', kind: 'http' }, stepNumber: 0, agent: 'assistant', sessionId: 's1', requestId: 'r1', principal,
    durationMs: 12, success: true, output: { city: 'Lima', temperature: 18 }, decision: 'allow' },
  beforeTurn: { turn: { agent: 'assistant', sessionId: 's1', requestId: 'r1', model: 'gpt-4o', system: '', messages: [], tools: [], maxSteps: 8 }, principal },
  beforeStep: { turn: { agent: 'assistant', sessionId: 's1', requestId: 'r1', model: 'gpt-4o', system: '', messages: [], tools: [], maxSteps: 8 },
    step: { stepNumber: 1, steps: [], model: 'gpt-4o', activeTools: [] }, principal },
  beforePersist: { message: { id: 'm1', role: 'user', parts: [{ type: 'text', text: 'My card is 4111 1111 1111 1111, mail me at ann@example.com' }] },
    agent: 'assistant', sessionId: 's1', requestId: 'r1', principal },
  onChatError: { error: { stage: 'stream', class: 'rate_limit', message: '429 Too Many Requests' },
    agent: 'assistant', sessionId: 's1', requestId: 'r1', principal },
};

export async function render(main, { params }) {
  const hook = h('select', { id: 'hook' }, Object.keys(templates).map(k => h('option', { value: k }, k)));
  const input = h('textarea', { id: 'input', class: 'code', rows: 18, spellcheck: 'false', 'aria-label': 'input' });
  const cand = editor('candidate');
  const out = h('div', { id: 'results', class: 'sidebyside' });
  let source = h('span', {}, 'template');
  const fromDecision = params.get('decision');
  if (fromDecision) {
    const d = await api('GET', '/v1/admin/decisions/' + encodeURIComponent(fromDecision));
    hook.value = d.hook;
    input.value = JSON.stringify(d.record, null, 2);
    source = h('span', {}, 'decision ', h('a', { href: '#/decision/' + encodeURIComponent(d.id) }, h('code', {}, d.id)));
  } else {
    hook.value = params.get('hook') || 'beforeToolCall';
    input.value = JSON.stringify(templates[hook.value] || templates.beforeToolCall, null, 2);
  }
  hook.addEventListener('change', () => {
    input.value = JSON.stringify(templates[hook.value], null, 2);
    mount(sourceEl, 'template');
  });
  const sourceEl = h('span', { id: 'source' }, source);
  const run = async (ev) => {
    ev.preventDefault();
    delete out.dataset.done;
    let doc;
    try { doc = JSON.parse(input.value); } catch (e) { mount(out, errorBox({ code: 'invalid_json', message: 'the input is not JSON: ' + e.message })); return; }
    // explain: the gateway adds the rules that did not fire and why.
    const body = { hook: hook.value, input: doc, explain: true };
    const files = cand.files();
    if (files) body.candidate = { files };
    mount(out, h('p', { class: 'muted' }, 'Evaluating…'));
    try {
      const res = await api('POST', '/v1/admin/rules/eval', body);
      // Without a candidate the gateway answers the live result alone;
      // with one, {live, candidate}.
      const live = res.live || res;
      mount(out, column('Live revision', live, 'live'), files ? column('Candidate', res.candidate, 'candidate-result') : null);
    } catch (e) {
      mount(out, errorBox(e));
    }
    out.dataset.done = 'true';
  };
  mount(main,
    h('h1', {}, 'Playground'),
    h('form', { id: 'playground', onsubmit: run },
      h('section', { class: 'card' },
        h('div', { class: 'row' }, h('label', {}, h('span', {}, 'Hook'), hook), h('span', { class: 'muted' }, 'input from ', sourceEl)),
        input,
        h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'evaluate' }, 'Evaluate'))),
      cand.el),
    out);
}

// at renders a location as file:line.
const at = l => l ? l.file + ':' + l.line : '';

// whyNot renders one rule that did not fire: a CEL rule's when and its
// value, or a Rego rule's first failing expression and where it is.
function whyNot(n) {
  const why = n.when !== undefined
    ? ['when ', h('code', {}, n.when), ' was ', h('code', {}, n.value)]
    : n.failed ? ['failed at ', h('code', {}, at(n.failedAt)), ': ', h('code', {}, n.failed)] : ['its body was not reached'];
  return h('li', {}, h('code', {}, n.rule), ' (', h('code', {}, at(n.location)), ') ', why);
}

// column renders one evaluation result.
function column(title, r, id) {
  if (!r) return h('section', { class: 'card result', id }, h('h2', {}, title), h('p', { class: 'muted' }, 'no result'));
  const fired = r.rulesFired || [];
  const notFired = r.notFired || [];
  return h('section', { class: 'card result', id, dataset: { outcome: r.outcome } },
    h('h2', {}, title, ' ', outcome(r.outcome, r.shadow && r.shadow.changed)),
    h('p', {}, 'Revision ', h('code', {}, r.revision || '')),
    r.error ? errorBox({ code: 'error', message: r.error }) : null,
    h('h3', {}, 'Rules fired'),
    fired.length ? h('ul', { class: 'fired' }, firedRules(fired, r.rulesFiredAt).map(f => h('li', {}, f))) : h('p', { class: 'muted' }, 'none'),
    r.result !== undefined ? [h('h3', {}, 'Decision'), json(r.result)] : null,
    r.shadow ? [h('h3', {}, 'Shadow'), json(r.shadow)] : null,
    notFired.length ? [h('h3', {}, 'Why not'), h('ul', { class: 'whynot' }, notFired.map(whyNot))] : null,
    r.prints && r.prints.length ? [h('h3', {}, 'print()'), h('pre', {}, r.prints.join('\n'))] : null);
}
