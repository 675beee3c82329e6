// The dashboard's calls to serve: the session's CSRF token on every
// request, errors in Daytona's shape turned into Error messages.

let session = null;

// loadSession reads the session (and its CSRF token); without one it goes
// to the login page.
export async function loadSession() {
  const r = await fetch('/dashboard/session', { credentials: 'same-origin' });
  if (r.status === 401) {
    location.href = '/dashboard/login.html';
    throw new Error('not logged in');
  }
  if (!r.ok) throw new Error(`session: ${r.status}`);
  session = await r.json();
  return session;
}

// headers returns the headers of a request with the session's token.
export function headers(extra = {}) {
  const h = { ...extra };
  if (session && session.csrfToken) h['X-CSRF-Token'] = session.csrfToken;
  return h;
}

// request sends method path with an optional JSON body; it returns the
// Response, throwing on an error status.
export async function request(method, path, body, init = {}) {
  const opts = { method, credentials: 'same-origin', headers: headers(init.headers || {}) };
  if (body instanceof FormData) {
    opts.body = body;
  } else if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  if (r.status === 401 && session && session.csrfToken) {
    location.href = '/dashboard/login.html';
  }
  if (!r.ok) {
    let msg = `${method} ${path}: ${r.status}`;
    try {
      const e = await r.json();
      if (e.message) msg = Array.isArray(e.message) ? e.message.join(', ') : e.message;
    } catch { /* not JSON */ }
    throw new Error(msg);
  }
  return r;
}

// json sends a request and decodes its JSON answer (null when empty).
export async function json(method, path, body) {
  const r = await request(method, path, body);
  const text = await r.text();
  return text ? JSON.parse(text) : null;
}

// toolbox returns the path of a sandbox's toolbox route through serve's proxy.
export function toolbox(id, route) {
  return `/toolbox/${encodeURIComponent(id)}${route}`;
}

// wsURL returns the WebSocket URL of path, with the CSRF token (a page
// cannot set a WebSocket's headers).
export function wsURL(path) {
  const u = new URL(path, location.href);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  if (session && session.csrfToken) u.searchParams.set('csrf', session.csrfToken);
  return u.href;
}

// logout ends the session.
export async function logout() {
  await request('POST', '/dashboard/logout');
  location.href = '/dashboard/login.html';
}
