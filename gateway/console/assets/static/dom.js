// dom.js builds elements node by node, never by parsing markup: every string a page shows is a
// text node, so a tool input or a rule message can never become markup.

// h(tag, attrs, ...children) returns a new element. attrs: class, href,
// type, value, … as attributes; on* keys as event listeners; dataset keys
// as data-*. Children are nodes, strings, numbers, arrays or null.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value') el.value = v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// mount replaces el's children.
export function mount(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// json shows a value as indented JSON in a <pre>.
export function json(v, cls) {
  return h('pre', { class: 'json ' + (cls || '') }, JSON.stringify(v, null, 2));
}

// errorBox shows an API error: its code, message and positioned details.
export function errorBox(err) {
  const details = Array.isArray(err.details) ? err.details : [];
  return h('div', { class: 'error', role: 'alert' },
    h('strong', {}, err.code ? err.code + ': ' : 'error: '), err.message || String(err),
    details.length ? h('ul', {}, details.map(d => h('li', {}, position(d), ' ', d.message || JSON.stringify(d),
      d.snippet ? h('pre', { class: 'snippet' }, d.snippet) : null))) : null);
}

// position renders a policy.Error's location as file:line:col.
export function position(d) {
  const l = d.location || {};
  if (!l.file) return '';
  return h('code', {}, l.file + (l.line ? ':' + l.line + (l.column ? ':' + l.column : '') : ''));
}

// time renders an RFC 3339 timestamp in the browser's locale, with the
// exact value as its title.
export function time(ts) {
  if (!ts) return '';
  const d = new Date(ts);
  return h('time', { datetime: ts, title: ts }, isNaN(d) ? ts : d.toLocaleString());
}
