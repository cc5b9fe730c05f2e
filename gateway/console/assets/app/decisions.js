// decisions.js: the decision store's filters and list
// (GET /v1/admin/decisions), and one decision's full record
// (GET /v1/admin/decisions/{id}) with links to its turn and the
// playground.
import { h, mount, json, time } from '/console/static/dom.js';
import { api, query } from './api.js';
import { table } from './overview.js';

// The closed filters' values, as the server's decisions.Hooks, Outcomes
// and Actions list them (TestFilterValues keeps them the same).
export const hooks = ['beforeTurn', 'beforeStep', 'beforeToolCall', 'afterToolCall', 'toolResult', 'onStepFinish', 'beforePersist', 'onChatError', 'onChatResponse'];
export const outcomes = ['matched', 'no_match', 'not_evaluated', 'error'];
export const actions = ['allow', 'block', 'substitute', 'approval', 'rewrite', 'error', 'client'];

// filters are the list's query parameters, in the form's order.
const filters = [
  ['since', 'Since (RFC 3339)'], ['until', 'Until'], ['tenant', 'Tenant'], ['agent', 'Agent'], ['session', 'Session'],
  ['turn', 'Turn (request id)'], ['tool', 'Tool'], ['hook', 'Hook', ['', ...hooks]],
  ['outcome', 'Outcome', ['', ...outcomes]], ['action', 'Action', ['', ...actions]], ['rule', 'Rule fired'], ['revision', 'Revision'],
  ['shadowChanged', 'Shadow changed', ['', 'true', 'false']], ['limit', 'Page size'],
];

export async function render(main, { params }) {
  const inputs = {};
  const form = h('form', { id: 'filters', class: 'card filters', onsubmit: (ev) => {
    ev.preventDefault();
    const q = {};
    for (const [k, el] of Object.entries(inputs)) q[k] = el.value.trim();
    location.hash = '#/decisions' + query(q);
  } },
  filters.map(([k, label, options]) => {
    inputs[k] = options ? h('select', { name: k, id: 'f-' + k }, options.map(o => h('option', { value: o }, o || 'any'))) :
      h('input', { name: k, id: 'f-' + k, placeholder: label });
    inputs[k].value = params.get(k) || '';
    return h('label', {}, h('span', {}, label), inputs[k]);
  }),
  h('button', { type: 'submit' }, 'Search'));
  mount(main, h('h1', {}, 'Decisions'), form, h('div', { id: 'list' }, h('p', { class: 'muted' }, 'Loading…')));
  const list = main.querySelector('#list');
  const data = await api('GET', '/v1/admin/decisions' + query(Object.fromEntries(params)));
  const ds = data.decisions || [];
  mount(list,
    ds.length ? table(['Time', 'Hook', 'Agent', 'Session', 'Tool', 'Outcome', 'Rules fired', ''], ds.map(d => [
      time(d.time), d.hook, d.agent, h('code', {}, d.session), d.tool ? h('code', {}, d.tool) : '',
      outcome(d.action || d.outcome, d.shadowChanged), firedRules(d.rulesFired, (d.record || {}).rulesFiredAt),
      h('a', { href: '#/decision/' + encodeURIComponent(d.id), class: 'open' }, 'record')]),
    (i) => ({ class: 'decision', dataset: { id: ds[i].id, outcome: ds[i].outcome } }))
      : h('p', { class: 'muted', id: 'no-decisions' }, 'No decision matches.'),
    data.next ? h('a', { class: 'button', id: 'next', href: '#/decisions' + query({ ...Object.fromEntries(params), cursor: data.next }) }, 'Next page') : null);
}

// outcome renders an outcome as a badge (with the shadow mark).
export function outcome(o, shadowChanged) {
  const cls = { allow: 'allow', block: 'block', error: 'block', approval: 'warn', substitute: 'warn', rewrite: 'warn', matched: 'warn' }[o] || '';
  return [h('span', { class: 'badge ' + cls }, o), shadowChanged ? h('span', { class: 'badge shadow', title: 'the shadow rules would decide otherwise' }, 'shadow ≠') : null];
}

// firedRules renders the rules fired, each as "rule (file:line)" where its
// record says where it is defined (rulesFiredAt, in the same order).
export function firedRules(fired, firedAt) {
  return (fired || []).map((r, i) => h('code', { class: 'rule' }, r, firedAt && firedAt[i] ? ' (' + firedAt[i] + ')' : ''));
}

// renderOne shows one decision: what the rules saw, what they decided,
// which rules fired, the revision and the shadow outcome.
export async function renderOne(main, { arg }) {
  const d = await api('GET', '/v1/admin/decisions/' + encodeURIComponent(arg));
  const rec = d.record || {};
  mount(main,
    h('h1', {}, 'Decision ', h('code', {}, d.id)),
    h('section', { class: 'card', id: 'summary' },
      h('dl', { class: 'facts' }, [
        ['Time', time(d.time)], ['Hook', d.hook], ['Tenant', d.tenant], ['Agent', d.agent], ['Session', h('code', {}, d.session)],
        ['Turn', d.turn ? h('a', { href: '#/turn/' + encodeURIComponent(d.turn), id: 'turn-link' }, d.turn) : '—'],
        ['Tool', d.tool || '—'], ['Outcome', [d.outcome, ' ', outcome(d.action || d.outcome, d.shadowChanged)]],
        ['Rules fired', (d.rulesFired || []).length ? h('span', { id: 'fired' }, firedRules(d.rulesFired, rec.rulesFiredAt)) : 'none'],
        ['Revision', h('code', {}, d.revision)],
      ].map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])),
      h('div', { class: 'actions' },
        h('a', { class: 'button', id: 'open-playground', href: '#/playground?decision=' + encodeURIComponent(d.id) }, 'Open in playground'))),
    rec.decision !== undefined || rec.result !== undefined ? h('section', { class: 'card' }, h('h2', {}, 'Decision'), json(rec.decision ?? rec.result)) : null,
    rec.shadow ? h('section', { class: 'card', id: 'shadow' }, h('h2', {}, 'Shadow outcome'), json(rec.shadow)) : null,
    rec.input ? h('section', { class: 'card' }, h('h2', {}, 'Input as the rules saw it'), json(rec.input)) : null,
    h('section', { class: 'card' }, h('h2', {}, 'Full record'), json(rec, 'record')));
}
