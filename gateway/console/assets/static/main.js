// main.js is the only script a visitor who has not signed in receives: it
// asks whether this browser has a session and either starts the console
// (whose modules the gateway serves to a session only) or shows the
// sign-in form. The API key goes to the gateway once, in the sign-in
// request; the browser keeps only the HttpOnly cookie it gets back.
import { h, mount, errorBox } from './dom.js';

async function currentSession() {
  const r = await fetch('/console/api/session', { credentials: 'same-origin', headers: { Accept: 'application/json' } });
  return r.ok ? r.json() : null;
}

function showSignIn(message) {
  document.getElementById('nav').replaceChildren();
  document.getElementById('who').replaceChildren();
  const key = h('input', { id: 'key', type: 'password', name: 'key', autocomplete: 'off', required: true, placeholder: 'API key', 'aria-label': 'API key' });
  const out = h('div', { id: 'signin-error' }, message ? errorBox({ message }) : null);
  const form = h('form', { id: 'signin', class: 'card narrow', onsubmit: async (ev) => {
    ev.preventDefault();
    const r = await fetch('/console/api/session', {
      method: 'POST', credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify({ key: key.value }),
    });
    key.value = '';
    const body = await r.json().catch(() => ({ message: r.statusText }));
    if (!r.ok) { mount(out, errorBox(body)); return; }
    start(body);
  } },
  h('h1', {}, 'Sign in'),
  h('p', { class: 'muted' }, 'Use an API key with the admin role, or with a role approvals name (role:NAME). The key is exchanged for a session cookie; the browser does not keep it.'),
  key, h('button', { type: 'submit' }, 'Sign in'), out);
  mount(document.getElementById('main'), form);
  key.focus();
}

async function start(session) {
  const app = await import('/console/app/app.js');
  app.start(session, showSignIn);
}

const s = await currentSession();
if (s) start(s); else showSignIn();
