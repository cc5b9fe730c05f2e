// overview.js: the replica's live revision and rule files, reload history
// and the last rejected reload with its positions, rule tests and
// coverage, shadow rules, kill switches and limits — whatever
// GET /v1/admin/rules reports.
import { h, mount, json, errorBox, position, time } from '/console/static/dom.js';
import { api } from './api.js';

// known are the members rendered as their own sections; any other member
// the gateway adds is shown as JSON under its name.
const known = new Set(['dir', 'revision', 'files', 'loadedAt', 'lastReload', 'lastCheck', 'lastError', 'reloadsOk',
  'reloadsFailed', 'replica', 'killSwitches', 'reloads', 'reloadHistory', 'tests', 'coverage', 'shadow', 'shadowRules', 'quotas', 'limits']);

export async function render(main) {
  const st = await api('GET', '/v1/admin/rules');
  const history = st.reloads || st.reloadHistory;
  const shadow = st.shadowRules || st.shadow;
  mount(main,
    h('h1', {}, 'Overview'),
    h('section', { class: 'card', id: 'revision' },
      h('h2', {}, 'Live revision'),
      h('dl', { class: 'facts' },
        fact('Replica', st.replica || '—'),
        fact('Revision', h('code', { id: 'revision-id' }, st.revision)),
        fact('Rules directory', h('code', {}, st.dir)),
        fact('Loaded', time(st.loadedAt)),
        fact('Last reload', st.lastReload ? time(st.lastReload) : 'none since start'),
        fact('Last check', st.lastCheck ? time(st.lastCheck) : '—'),
        fact('Reloads', `${st.reloadsOk || 0} accepted, ${st.reloadsFailed || 0} rejected`)),
      st.lastError && st.lastError.length ? h('div', { class: 'error', id: 'last-error' },
        h('strong', {}, 'The last reload was rejected; the revision above keeps serving.'),
        h('ul', {}, st.lastError.map(e => h('li', {}, position(e), ' ', e.code ? h('span', { class: 'badge' }, e.code) : null, ' ', e.message,
          e.snippet ? h('pre', { class: 'snippet' }, e.snippet) : null)))) : null),
    h('section', { class: 'card', id: 'files' },
      h('h2', {}, 'Rule files'),
      table(['File', 'Kind', 'Size', 'SHA-256'], (st.files || []).map(f =>
        [h('code', {}, f.name), f.kind, f.size, h('code', { class: 'hash' }, (f.sha256 || '').slice(0, 16))]))),
    history ? h('section', { class: 'card', id: 'reloads' }, h('h2', {}, 'Reload history'),
      table(['Time', 'Result', 'Revision', 'Errors'], history.map(r => [time(r.time || r.at), r.accepted === false || r.ok === false || (r.errors && r.errors.length) ? h('span', { class: 'badge block' }, 'rejected') : h('span', { class: 'badge allow' }, 'accepted'),
        h('code', { class: 'hash' }, (r.revision || '').slice(0, 23)),
        (r.errors || []).map(e => h('div', {}, position(e), ' ', e.message))]))) : null,
    st.tests || st.coverage ? h('section', { class: 'card', id: 'tests' }, h('h2', {}, 'Rule tests and coverage'),
      st.tests ? json(st.tests) : null, st.coverage ? json(st.coverage) : null) : null,
    shadow ? h('section', { class: 'card', id: 'shadow' }, h('h2', {}, 'Shadow rules'),
      Array.isArray(shadow) ? table(['Rule', 'Disagreements'], shadow.map(s => [h('code', {}, s.rule || s.name || JSON.stringify(s)), s.disagreements ?? s.changed ?? '—'])) : json(shadow)) : null,
    h('section', { class: 'card', id: 'killswitches' },
      h('h2', {}, 'Kill switches'),
      (st.killSwitches || []).length ? table(['Id', 'Stops', 'Scope', 'Reason', 'Set by', 'Set', 'Expires'], st.killSwitches.map(k =>
        [h('code', {}, k.id), k.block, scope(k), k.reason, k.createdBy, time(k.createdAt), k.expiresAt ? time(k.expiresAt) : 'until lifted']))
        : h('p', { class: 'muted' }, 'None in force.')),
    st.quotas || st.limits ? h('section', { class: 'card', id: 'limits' }, h('h2', {}, 'Quotas and limits'), json(st.quotas || st.limits)) : null,
    Object.keys(st).filter(k => !known.has(k)).map(k => h('section', { class: 'card' }, h('h2', {}, k), json(st[k]))));
}

function scope(k) {
  const parts = ['tenant', 'agent'].filter(f => k[f]).map(f => f + ' ' + k[f]);
  if (k.tools && k.tools.length) parts.push('tools ' + k.tools.join(', '));
  return parts.join(', ') || 'everything';
}

function fact(label, value) {
  return [h('dt', {}, label), h('dd', {}, value)];
}

// table renders rows (arrays of cells) under head.
export function table(head, rows, rowAttrs) {
  return h('table', {},
    h('thead', {}, h('tr', {}, head.map(c => h('th', {}, c)))),
    h('tbody', {}, rows.map((r, i) => h('tr', rowAttrs ? rowAttrs(i) : {}, r.map(c => h('td', {}, c))))));
}

export { errorBox };
