// timeline.js: one turn's hooks in execution order
// (GET /v1/admin/decisions?turn=ID&order=asc): beforeTurn, then each
// step's beforeStep, its tool calls' beforeToolCall and toolResult, as the
// reference's execution-order diagram draws a turn.
import { h, mount, time } from '/console/static/dom.js';
import { api, query } from './api.js';
import { outcome } from './decisions.js';

export async function render(main, { arg, params }) {
  const turn = arg || params.get('turn') || '';
  const input = h('input', { id: 'turn-id', placeholder: 'request id of the turn', value: turn });
  const form = h('form', { class: 'card filters', onsubmit: (ev) => { ev.preventDefault(); location.hash = '#/turn/' + encodeURIComponent(input.value.trim()); } },
    h('label', {}, h('span', {}, 'Turn'), input), h('button', { type: 'submit' }, 'Show'));
  mount(main, h('h1', {}, 'Turn timeline'), form);
  if (!turn) { main.append(h('p', { class: 'muted' }, 'Pick a turn: its request id, or "turn" on a decision.')); return; }
  const data = await api('GET', '/v1/admin/decisions' + query({ turn, order: 'asc', limit: 500 }));
  const ds = data.decisions || [];
  if (!ds.length) { main.append(h('p', { class: 'muted', id: 'no-decisions' }, 'No decision recorded for this turn.')); return; }
  let step = null;
  const items = [];
  for (const d of ds) {
    const s = stepOf(d);
    if (d.hook !== 'beforeTurn' && s !== null && s !== step) {
      step = s;
      items.push(h('li', { class: 'step' }, 'step ', String(s)));
    }
    items.push(h('li', { class: 'hook ' + d.hook, dataset: { hook: d.hook, id: d.id } },
      h('span', { class: 'hookname' }, d.hook),
      d.tool ? h('code', {}, d.tool) : null, ' ', outcome(d.outcome, d.shadowChanged), ' ',
      (d.rulesFired || []).map(r => h('code', { class: 'rule' }, r)), ' ',
      summary(d), ' ',
      h('a', { href: '#/decision/' + encodeURIComponent(d.id) }, 'record'), ' ', time(d.time)));
  }
  const last = ds[ds.length - 1].record || {};
  main.append(h('section', { class: 'card' },
    h('p', {}, 'Session ', h('code', {}, ds[0].session), ' · agent ', ds[0].agent, ' · ', String(ds.length), ' hooks'),
    h('ol', { class: 'timeline', id: 'timeline' }, items),
    last.stopReason || last.finishReason ? h('p', { id: 'stop' }, 'Stop reason: ', last.stopReason || last.finishReason) : null));
}

// stepOf is the step a decision belongs to, from its record.
function stepOf(d) {
  const r = d.record || {};
  const i = r.input || {};
  for (const v of [d.step, r.stepNumber, i.stepNumber, i.step && i.step.stepNumber]) if (typeof v === 'number') return v;
  return null;
}

// summary says in a few words what the hook changed.
function summary(d) {
  const r = d.record || {};
  const dec = r.decision ?? r.result;
  if (!dec || typeof dec !== 'object') return null;
  const keys = Object.keys(dec).filter(k => dec[k] !== null && dec[k] !== undefined);
  return keys.length ? h('span', { class: 'muted' }, 'sets ', keys.join(', ')) : null;
}
