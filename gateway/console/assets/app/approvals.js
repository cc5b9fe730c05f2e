// approvals.js: the pending approvals the signed-in principal may decide
// (the gateway lists only those), approve or deny with a reason, and the
// decided ones.
import { h, mount, json, errorBox, time } from '/console/static/dom.js';
import { api } from './api.js';
import { table } from './overview.js';

export async function render(main) {
  const [pending, all] = await Promise.all([
    api('GET', '/v1/approvals?state=pending'),
    api('GET', '/v1/approvals?state=all'),
  ]);
  const decided = all.approvals.filter(a => a.state !== 'pending').reverse();
  mount(main,
    h('h1', {}, 'Approvals'),
    h('section', { id: 'pending' },
      h('h2', {}, 'Waiting for you (', String(pending.approvals.length), ')'),
      pending.approvals.length ? pending.approvals.map(a => card(main, a)) :
        h('p', { class: 'muted', id: 'no-pending' }, 'No approval waits for a role you hold.')),
    h('section', { class: 'card', id: 'history' },
      h('h2', {}, 'History'),
      decided.length ? table(['Decided', 'Tool', 'Session', 'State', 'By', 'Reason'], decided.map(a => [
        time(a.decidedAt), h('code', {}, a.toolName), h('code', {}, a.sessionId),
        h('span', { class: 'badge ' + (a.state === 'approved' ? 'allow' : 'block') }, a.state), a.decidedBy || '', a.reason || '']),
      (i) => ({ dataset: { approval: decided[i].id } })) : h('p', { class: 'muted' }, 'Nothing decided yet.')));
}

function reasons(a) {
  const r = Array.isArray(a.reasons) ? a.reasons : [];
  return r.map(x => typeof x === 'string' ? x : x.reason || JSON.stringify(x));
}

function card(main, a) {
  const reason = h('textarea', { class: 'reason', rows: 2, placeholder: 'Reason (the model sees it)', 'aria-label': 'reason' });
  const out = h('div', { class: 'result' });
  const decide = (approved) => async () => {
    try {
      await api('POST', '/v1/approvals/' + encodeURIComponent(a.id), { approved, reason: reason.value });
      await render(main);
    } catch (e) {
      mount(out, errorBox(e));
    }
  };
  return h('article', { class: 'card approval', dataset: { approval: a.id } },
    h('h3', {}, h('code', {}, a.toolName), ' in session ', h('code', {}, a.sessionId), ' · agent ', a.agent),
    h('ul', { class: 'reasons' }, reasons(a).map(r => h('li', {}, r))),
    h('p', { class: 'muted' }, 'Approvers: ', (a.approvers || []).join(', '), ' · requested ', time(a.requestedAt), ' · expires ', time(a.expiresAt)),
    h('details', { open: true }, h('summary', {}, 'Tool input'), json(a.input)),
    reason,
    h('div', { class: 'actions' },
      h('button', { class: 'approve', onclick: decide(true) }, 'Approve'),
      h('button', { class: 'deny danger', onclick: decide(false) }, 'Deny')),
    out);
}
