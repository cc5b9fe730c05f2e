// replay.js: a candidate rules directory against the recorded decisions of
// a time range (POST /v1/admin/replay): the counts and examples of
// `turngate replay`, each changed decision linked to its record.
import { h, mount, json, errorBox } from '/console/static/dom.js';
import { api } from './api.js';
import { editor } from './candidate.js';
import { table } from './overview.js';

export async function render(main, { params }) {
  const since = h('input', { id: 'since', placeholder: 'since (RFC 3339)', value: params.get('since') || new Date(Date.now() - 24 * 3600e3).toISOString() });
  const until = h('input', { id: 'until', placeholder: 'until (RFC 3339, default now)', value: params.get('until') || '' });
  const limit = h('input', { id: 'limit', type: 'number', min: 1, placeholder: 'default 1000, at most 20000', value: params.get('limit') || '' });
  const cand = editor('candidate');
  const out = h('div', { id: 'results' });
  const run = async (ev) => {
    ev.preventDefault();
    const files = cand.files();
    if (!files) { mount(out, errorBox({ code: 'invalid_request', message: 'add the candidate rules first' })); return; }
    const body = { candidate: { files }, since: since.value.trim() };
    if (until.value.trim()) body.until = until.value.trim();
    if (limit.value.trim()) body.limit = Number(limit.value.trim());
    mount(out, h('p', { class: 'muted' }, 'Replaying…'));
    try {
      mount(out, report(await api('POST', '/v1/admin/replay', body)));
    } catch (e) {
      mount(out, errorBox(e));
    }
    out.dataset.done = 'true';
  };
  mount(main, h('h1', {}, 'Replay'),
    h('form', { id: 'replay', onsubmit: run },
      h('section', { class: 'card filters' },
        h('label', {}, h('span', {}, 'Since'), since), h('label', {}, h('span', {}, 'Until'), until), h('label', {}, h('span', {}, 'Max records (default 1000)'), limit),
        h('button', { type: 'submit', id: 'run' }, 'Replay')),
      cand.el),
    out);
}

// report renders the replay summary as `turngate replay` does: the
// counts, then each kind of change with its examples (at most 5 per kind),
// each linked to the recorded decision. A replay stopped at its limit of
// records says so first: its counts are of the range's first records only.
function report(r) {
  const counts = Object.entries(r).filter(([k, v]) => typeof v === 'number' && k !== 'limit');
  const side = (x) => x ? [h('code', {}, x.outcome), ' ', (x.rulesFired || []).map(f => h('code', { class: 'rule' }, f))] : '';
  const changes = r.changes || [];
  return h('section', { class: 'card', id: 'report' },
    r.truncated ? h('p', { class: 'notice warn', id: 'truncated' },
      `Stopped at the limit of ${r.limit} records: the range holds more. These counts are of its first ${r.limit} records (oldest first); `,
      'raise Max records (at most 20000) or narrow the range to replay the rest.') : null,
    h('h2', {}, 'Counts'),
    table(['', 'decisions'], counts.map(([k, v]) => [k, h('span', { class: 'count', dataset: { count: k } }, String(v))])),
    r.fromRevisions ? [h('h3', {}, 'Recorded under'), table(['revision', 'decisions'], Object.entries(r.fromRevisions).map(([k, v]) => [h('code', {}, k), String(v)]))] : null,
    (r.failed || []).length ? [h('h3', {}, 'Failed'), h('ul', {}, r.failed.map(f => h('li', {}, f)))] : null,
    h('h2', {}, 'Changed decisions'),
    changes.length ? changes.map(c => [
      h('h3', {}, c.kind, ' (', h('span', { dataset: { kindCount: c.kind } }, String(c.count)), ')'),
      table(['Decision', 'Hook', 'Session', 'Tool', 'Recorded', 'Candidate'], (c.examples || []).map(e => [
        e.id ? h('a', { href: '#/decision/' + encodeURIComponent(e.id), class: 'changed' }, h('code', {}, e.id)) : '—',
        e.hook, h('code', {}, e.sessionId || ''), e.toolName || '', side(e.old), side(e.new)]))])
      : h('p', { class: 'muted' }, 'No decision changes.'));
}
