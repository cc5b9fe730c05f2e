// candidate.js: the editor of a candidate rules directory, shared by the
// playground and replay: files by name, typed in or loaded from a folder
// of this machine. The files go to the gateway as
// {"candidate": {"files": {name: text}}}.
import { h } from '/console/static/dom.js';

// ruleFile says whether a file of a picked folder is a rule file.
const ruleFile = (name) => /\.(rego|ya?ml|json)$/.test(name);

// editor returns {el, files()}: the editor's element and the files it holds
// (null when it holds none, i.e. no candidate).
export function editor(id) {
  const list = h('div', { class: 'files' });
  const addFile = (name, text) => {
    const nameIn = h('input', { class: 'fname', value: name, placeholder: 'name.rego or name.yaml', 'aria-label': 'file name' });
    const textIn = h('textarea', { class: 'ftext code', rows: 10, spellcheck: 'false', 'aria-label': 'file text' });
    textIn.value = text;
    const row = h('div', { class: 'file' }, h('div', { class: 'row' }, nameIn,
      h('button', { type: 'button', class: 'link', onclick: () => row.remove() }, 'remove')), textIn);
    list.append(row);
  };
  const picker = h('input', { type: 'file', multiple: true, webkitdirectory: true, class: 'picker', 'aria-label': 'load a rules folder',
    onchange: async () => {
      list.replaceChildren();
      for (const f of picker.files) {
        const name = f.webkitRelativePath ? f.webkitRelativePath.split('/').slice(1).join('/') : f.name;
        if (ruleFile(name)) addFile(name, await f.text());
      }
    } });
  const el = h('section', { class: 'card candidate', id },
    h('h2', {}, 'Candidate rules'),
    h('p', { class: 'muted' }, 'The rules directory to try: every file of it (the candidate replaces the live revision, all or nothing). Load a folder or type files.'),
    h('div', { class: 'row' }, picker, h('button', { type: 'button', class: 'add', onclick: () => addFile('', '') }, 'Add file')),
    list);
  return {
    el,
    add: addFile,
    files() {
      const out = {};
      for (const row of list.querySelectorAll('.file')) {
        const name = row.querySelector('.fname').value.trim();
        if (name) out[name] = row.querySelector('.ftext').value;
      }
      return Object.keys(out).length ? out : null;
    },
  };
}
