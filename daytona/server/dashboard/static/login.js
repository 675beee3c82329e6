// The login page: posts the key as JSON (serve refuses form bodies on
// state-changing requests) and goes to the dashboard once the session
// cookie is set.
const form = document.getElementById('login-form');
const error = document.getElementById('login-error');

form.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  error.textContent = '';
  const key = document.getElementById('key').value.trim();
  try {
    const r = await fetch('/dashboard/login', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ key }),
      credentials: 'same-origin',
    });
    if (r.status === 409) { location.href = '/dashboard/'; return; }
    if (!r.ok) {
      const body = await r.json().catch(() => ({}));
      error.textContent = body.message || `login failed: ${r.status}`;
      return;
    }
    location.href = '/dashboard/';
  } catch (e) {
    error.textContent = `login failed: ${e.message}`;
  }
});
