// overview.js: the replica's live revision and rule files, every replica's
// revision on a shared store, reload history
// with the positions of rejected reloads, rule test counts, shadow rules'
// disagreements, kill switches and quotas with their current usage, as
// GET /v1/admin/rules reports them.
import { h, mount, json, errorBox, position, time } from '/console/static/dom.js';
import { api } from './api.js';

// known are the members rendered as their own sections; any other member
// the gateway adds is shown as JSON under its name.
const known = new Set(['dir', 'revision', 'files', 'loadedAt', 'lastReload', 'lastCheck', 'lastError', 'reloadsOk',
  'reloadsFailed', 'replica', 'replicas', 'replicasError', 'killSwitches', 'reloads', 'tests', 'coverage', 'coverageErrors', 'shadowRules', 'shadowDisagreements', 'shadowDisagreementsError', 'quotas', 'quotaUsageError']);

export async function render(main) {
  const st = await api('GET', '/v1/admin/rules');
  const history = st.reloads;
  const shadow = st.shadowRules;
  mount(main,
    h('h1', {}, 'Overview'),
    h('section', { class: 'card', id: 'revision' },
      h('h2', {}, 'Live revision'),
      h('dl', { class: 'facts' },
        fact('Replica', st.replica || '—'),
        fact('Revision', h('code', { id: 'revision-id' }, st.revision)),
        st.dir ? fact('Rules directory', h('code', { id: 'rules-dir' }, st.dir)) : null,
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
    replicas(st),
    history ? h('section', { class: 'card', id: 'reloads' }, h('h2', {}, 'Reload history'),
      table(['Time', 'Result', 'Revision', 'Errors'], history.map(r => [time(r.time), r.accepted ? h('span', { class: 'badge allow' }, 'accepted') : h('span', { class: 'badge block' }, 'rejected'),
        h('code', { class: 'hash', title: r.revision }, shortRevision(r.revision)),
        (r.errors || []).map(e => h('div', {}, position(e), ' ', e.message))]))) : null,
    st.tests ? h('section', { class: 'card', id: 'tests' }, h('h2', {}, 'Rule tests'),
      h('p', { id: 'tests-summary' }, st.tests.ran ? `${st.tests.passed} passed, ${st.tests.failed} failed when this revision was built.` : 'Not run: the rules directory has no tests.'),
      coverage(st)) : null,
    h('section', { class: 'card', id: 'shadow' }, h('h2', {}, 'Shadow rules'),
      st.shadowDisagreementsError ? h('div', { class: 'error', id: 'shadow-error' }, st.shadowDisagreementsError) : null,
      disagreements(st.shadowDisagreements),
      shadow ? (shadow.length ? table(['Rule', 'Hook', 'Would', 'Disagreements (this replica, every tenant, since it started)'],
        shadow.map(s => [h('code', {}, s.rule), s.hook, s.effect, s.disagreements]))
        : h('p', { class: 'muted' }, 'No shadow rule has fired on this replica since it started.')) : null),
    h('section', { class: 'card', id: 'killswitches' },
      h('h2', {}, 'Kill switches'),
      (st.killSwitches || []).length ? table(['Id', 'Stops', 'Scope', 'Reason', 'Set by', 'Set', 'Expires'], st.killSwitches.map(k =>
        [h('code', {}, k.id), k.block, scope(k), k.reason, k.createdBy, time(k.createdAt), k.expiresAt ? time(k.expiresAt) : 'until lifted']))
        : h('p', { class: 'muted' }, 'None in force.')),
    st.quotas ? h('section', { class: 'card', id: 'limits' }, h('h2', {}, 'Quotas'),
      st.quotaUsageError ? h('div', { class: 'error', id: 'quota-usage-error' }, st.quotaUsageError) : null,
      st.quotas.length ? table(['Name', 'Per', 'Scope', 'Limit', 'Window', 'Used in this window'], st.quotas.map(q => [h('code', {}, q.name), q.per, scope(q),
        limit(q), q.window + (q.timeZone ? ' ' + q.timeZone : ''), usage(q)]), i => ({ dataset: { quota: st.quotas[i].name } }))
        : h('p', { class: 'muted' }, 'None configured.')) : null,
    Object.keys(st).filter(k => !known.has(k)).map(k => h('section', { class: 'card' }, h('h2', {}, k), json(st[k]))));
}

// replicas lists what each replica of a shared store last reported (its
// revision, files and when), flagging a replica that fell silent (stale)
// and one serving another revision than this replica's; a SQLite gateway
// reports none: it is the only replica.
function replicas(st) {
  const list = st.replicas || [];
  const body = st.replicasError ? h('div', { class: 'error', id: 'replicas-error' }, st.replicasError)
    : !list.length ? h('p', { class: 'muted', id: 'single-replica' }, 'Single replica: this gateway\'s store serves it alone, so the revision above is the only one live.')
      : table(['Replica', 'Revision', 'Files', 'Last report', 'State'], list.map(r => [
        [h('code', {}, r.replica), r.replica === st.replica ? h('span', { class: 'muted' }, ' (this one)') : null],
        h('code', { class: 'hash', title: r.revision }, shortRevision(r.revision)),
        fileList(r.files || []),
        [time(r.reportedAt), h('span', { class: 'muted' }, ' ', age(r.ageSeconds), ' ago')],
        [r.stale ? h('span', { class: 'badge block', title: 'No report for 90 s: stopped, hung or cut off from the store.' }, 'stale') : null,
          r.revision !== st.revision ? h('span', { class: 'badge warn', title: 'Serves another revision than this replica\'s ' + st.revision }, 'differs') : null,
          !r.stale && r.revision === st.revision ? h('span', { class: 'badge allow' }, 'in step') : null]]),
      i => ({ dataset: { replica: list[i].replica, stale: String(!!list[i].stale), differs: String(list[i].revision !== st.revision) } }));
  const differ = list.filter(r => r.revision !== st.revision).length;
  return h('section', { class: 'card', id: 'replicas' }, h('h2', {}, 'Replicas'),
    differ ? h('p', { class: 'notice warn', id: 'replicas-differ' }, `${differ} of ${list.length} replicas serve another revision than this one.`) : null,
    body);
}

// shortRevision is "sha256:" and the revision's first 16 hex digits, as
// the reload history shows it.
function shortRevision(rev) {
  return (rev || '').slice(0, 23);
}

// fileList is a replica's rule files: how many, and their names.
function fileList(list) {
  return [`${list.length} ${list.length === 1 ? 'file' : 'files'}`, list.length ? h('div', { class: 'muted' }, list.map(f => f.name).join(', ')) : null];
}

// age renders a number of seconds as the largest whole unit.
function age(s) {
  s = s || 0;
  return s < 120 ? `${s} s` : s < 7200 ? `${Math.floor(s / 60)} min` : s < 172800 ? `${Math.floor(s / 3600)} h` : `${Math.floor(s / 86400)} days`;
}

// coverage is the live revision's test coverage: Rego lines and CEL
// rules, with the lines and rules no test reached.
function coverage(st) {
  const c = st.coverage;
  if (!c) {
    return (st.coverageErrors || []).length ? h('div', { class: 'error' }, 'Coverage could not be measured: ',
      st.coverageErrors.map(e => h('div', {}, position(e), ' ', e.message))) : null;
  }
  const gaps = (c.rego.files || []).filter(f => (f.notCovered || []).length).map(f =>
    [h('code', {}, f.file), `${f.percent.toFixed(1)} %`, f.notCovered.map(r => r.start === r.end ? `${r.start}` : `${r.start}–${r.end}`).join(', ')]);
  return h('div', { id: 'coverage' },
    h('p', { id: 'coverage-summary' }, `Rego: ${c.rego.coveredLines} of ${c.rego.coverableLines} lines (${c.rego.percent.toFixed(1)} %). CEL: ${c.cel.fired} of ${c.cel.rules} rules fired (${c.cel.percent.toFixed(1)} %).`),
    gaps.length ? table(['File', 'Covered', 'Lines no test reached'], gaps) : null,
    (c.cel.notFired || []).length ? h('ul', {}, c.cel.notFired.map(r => h('li', {}, h('code', {}, r.rule), ' ', position(r)))) : null);
}

// what a quota counts and its bound.
function limit(q) {
  return q.turns ? `${q.turns} turns` : q.inputTokens ? `${q.inputTokens} input tokens` : `${q.outputTokens} output tokens`;
}

// usage lists a quota's current count per key (GET /v1/admin/rules
// quotas[].usage): used of limit, since the window's start.
function usage(q) {
  const unit = q.turns ? 'turns' : 'tokens';
  const rows = q.usage || [];
  if (!rows.length) {
    const shared = !q.tenant && !/tenant|principal/.test(q.per);
    return h('span', { class: 'muted' }, shared ? 'counted across tenants: a global admin sees it' : 'no key known');
  }
  return h('ul', { class: 'usage' }, rows.map(u => {
    const key = [u.principal ? u.tenant + '/' + u.principal : u.tenant, u.agent ? 'agent ' + u.agent : ''].filter(Boolean).join(' · ');
    return h('li', { dataset: { key } },
      h('span', { class: 'key' }, key), ' ',
      h('meter', { min: 0, max: u.limit, value: Math.min(u.used, u.limit), high: u.limit * 0.8, optimum: 0 }), ' ',
      h('span', { class: 'used' + (u.used >= u.limit ? ' over' : '') }, `${u.used} / ${u.limit} ${unit}`), ' ',
      h('span', { class: 'muted' }, 'since ', time(u.since)));
  }), q.usageTruncated ? h('li', { class: 'muted' }, 'more keys than shown') : null);
}

function scope(k) {
  const parts = ['tenant', 'agent'].filter(f => k[f]).map(f => f + ' ' + k[f]);
  if (k.tools && k.tools.length) parts.push('tools ' + k.tools.join(', '));
  return parts.join(', ') || 'everything';
}

// disagreements renders the decision store's count of decisions the shadow
// rules would have decided otherwise: the tenant's, or every tenant's.
function disagreements(d) {
  if (!d) return null;
  const whose = d.tenant ? `tenant ${d.tenant}` : 'every tenant';
  return h('p', { id: 'shadow-disagreements' },
    `Disagreements (${whose}, every replica, last ${shortDuration(d.window)}): `, h('strong', {}, String(d.count)), ' since ', time(d.since), '.');
}

// shortDuration shortens a Go duration as the API writes it (24h0m0s: 24h).
function shortDuration(w) {
  return w.replace(/(\d+[hm])0s$/, '$1').replace(/(\d+h)0m$/, '$1');
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
