// app.js is the signed-in console: the navigation and a hash router over
// the views. Each view is a module exporting render(main, params, session).
import { h, mount, errorBox } from '/console/static/dom.js';
import { api, configure } from './api.js';
import * as overview from './overview.js';
import * as decisions from './decisions.js';
import * as timeline from './timeline.js';
import * as playground from './playground.js';
import * as replay from './replay.js';
import * as approvals from './approvals.js';

// views: the route name, its nav label, its module, whether it needs the
// admin role.
const views = [
  { name: 'overview', label: 'Overview', mod: overview, admin: true },
  { name: 'decisions', label: 'Decisions', mod: decisions, admin: true },
  { name: 'decision', mod: decisions, admin: true, render: decisions.renderOne },
  { name: 'turn', label: 'Turn timeline', mod: timeline, admin: true },
  { name: 'playground', label: 'Playground', mod: playground, admin: true },
  { name: 'replay', label: 'Replay', mod: replay, admin: true },
  { name: 'approvals', label: 'Approvals', mod: approvals, admin: false },
];

let session = null;

// start shows the console for session; signIn shows the sign-in form.
export function start(s, signIn) {
  session = s;
  configure(s.csrf, (msg) => { session = null; signIn(msg || 'Your session ended: sign in again.'); });
  renderChrome(signIn);
  window.onhashchange = route;
  route();
}

function allowed(v) { return session.admin || !v.admin; }

function renderChrome(signIn) {
  const nav = document.getElementById('nav');
  mount(nav, views.filter(v => v.label && allowed(v)).map(v =>
    h('a', { href: '#/' + v.name, id: 'nav-' + v.name }, v.label)));
  const who = document.getElementById('who');
  mount(who,
    h('span', { class: 'principal', id: 'principal' }, session.subject, ' · tenant ', session.tenant,
      session.roles && session.roles.length ? ' · ' + session.roles.join(', ') : ''),
    session.open ? h('span', { class: 'badge warn', title: 'No API keys are configured: every request is the anonymous admin, loopback only.' }, 'no keys · loopback') :
      h('button', { id: 'signout', class: 'link', onclick: async () => {
        try { await api('DELETE', '/console/api/session'); } catch (e) { /* ended already */ }
        session = null;
        location.hash = '';
        signIn('Signed out.');
      } }, 'Sign out'));
}

// parse splits "#/name/rest?query" into its parts.
function parse() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [pathPart, q] = raw.split('?');
  const [name, ...rest] = pathPart.split('/');
  return { name, arg: decodeURIComponent(rest.join('/')), params: new URLSearchParams(q || '') };
}

async function route() {
  if (!session) return;
  const { name, arg, params } = parse();
  let v = views.find(x => x.name === name && allowed(x));
  if (!v) v = views.find(x => x.name === (session.admin ? 'overview' : 'approvals'));
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.id === 'nav-' + (v.name === 'decision' ? 'decisions' : v.name));
  const main = document.getElementById('main');
  main.dataset.view = v.name;
  delete main.dataset.ready;
  mount(main, h('p', { class: 'muted' }, 'Loading…'));
  try {
    await (v.render || v.mod.render)(main, { arg, params }, session);
  } catch (e) {
    mount(main, errorBox(e));
  }
  main.dataset.ready = v.name;
}
