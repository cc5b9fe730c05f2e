// api.js calls the gateway's API with the session cookie, and the CSRF
// token on every request that can change something.
let csrf = '';
let onSignedOut = () => {};

// configure keeps the session's CSRF token (in memory only) and what to do
// when the gateway says the session ended.
export function configure(token, signedOut) { csrf = token; onSignedOut = signedOut; }

// APIError is a non-2xx answer: its status and the gateway's
// {code, message, errors}: errors (details) are the positioned diagnostics
// of refused rules.
export class APIError extends Error {
  constructor(status, body) {
    super(body.message || ('HTTP ' + status));
    this.status = status;
    this.code = body.code;
    this.details = body.errors || body.details;
    this.param = body.param;
  }
}

// api sends method path (with a JSON body when given) and returns the
// decoded answer (null for 204).
export async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (method !== 'GET' && method !== 'HEAD') headers['X-Turngate-CSRF'] = csrf;
  const init = { method, headers, credentials: 'same-origin' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  if (r.status === 204) return null;
  const data = await r.json().catch(() => ({ message: r.statusText }));
  if (r.status === 401 && path !== '/console/api/session') onSignedOut(data.message);
  if (!r.ok) throw new APIError(r.status, data);
  return data;
}

// query builds "?k=v&…" from the non-empty entries of obj.
export function query(obj) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(obj)) if (v !== '' && v !== undefined && v !== null) p.set(k, v);
  const s = p.toString();
  return s ? '?' + s : '';
}
