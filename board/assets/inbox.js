// The board's inbox: the agents' permission requests waiting for a person,
// with their options as buttons. Agent text reaches the DOM through
// textContent only.
'use strict';

(() => {
  const TOKEN_HEADER = 'X-Aimi-Board-Token';
  const token = sessionStorage.getItem('aimi-board-token');
  const section = document.getElementById('inbox');
  const list = document.getElementById('inbox-list');
  const heading = document.getElementById('inbox-h');
  const result = document.getElementById('inbox-result');
  const baseTitle = document.title;
  const probe = { polls: 0, count: 0 };
  window.aimiInbox = probe;
  let shown = '';

  function t(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  async function call(method, path, body) {
    const res = await fetch(path, {
      method, credentials: 'omit', cache: 'no-store',
      headers: Object.assign({ [TOKEN_HEADER]: token }, body ? { 'Content-Type': 'application/json' } : {}),
      body: body ? JSON.stringify(body) : undefined,
    });
    let answer = null;
    try { answer = await res.json(); } catch (_) { answer = null; }
    if (!res.ok) throw new Error(answer && answer.error ? answer.error : 'HTTP ' + res.status);
    return answer;
  }

  async function answer(req, opt, buttons) {
    buttons.forEach((b) => { b.disabled = true; });
    result.dataset.state = 'busy';
    result.textContent = 'answering ' + req.id + '…';
    try {
      await call('POST', '/api/answer', { repo: req.repoPath, id: req.id, option: opt.id });
      result.dataset.state = 'ok';
      result.textContent = req.id + ' (' + req.containerName + '): answered ' + opt.id;
    } catch (err) {
      result.dataset.state = 'error';
      result.textContent = 'answer to ' + req.id + ' refused: ' + err.message;
    }
    poll();
  }

  function render(reqs) {
    const key = JSON.stringify(reqs.map((r) => r.id));
    probe.count = reqs.length;
    document.title = reqs.length ? '(' + reqs.length + ') ' + baseTitle : baseTitle;
    heading.textContent = 'Waiting for you (' + reqs.length + ')';
    section.hidden = reqs.length === 0 && !result.textContent;
    if (key === shown) return;
    shown = key;
    list.textContent = '';
    for (const r of reqs) {
      const li = t('li', 'request');
      li.dataset.request = r.id;
      // A request of the egress proxy names every container waiting on it.
      const who = r.containers && r.containers.length > 1 ? r.containers.length + ' containers' : r.containerName;
      const what = t('div', 'what', who + ' · ' + (r.storyId || '-') + ' · ' + r.kind + ': ' + r.title);
      if (r.containers && r.containers.length > 1) what.title = r.containers.join(', ');
      li.appendChild(what);
      if (r.command) li.appendChild(t('div', 'detail', 'command: ' + r.command));
      for (const p of r.paths || []) li.appendChild(t('div', 'detail', 'path: ' + p));
      li.appendChild(t('div', 'detail', 'asked ' + new Date(r.askedAt).toLocaleTimeString() + ', fallback at ' + new Date(r.deadline).toLocaleTimeString()));
      const buttons = [];
      const row = t('div', 'actions');
      for (const o of r.options || []) {
        const b = t('button', 'act', o.name || o.id);
        b.type = 'button';
        b.title = o.kind + ' (' + o.id + ')';
        b.dataset.option = o.id;
        b.dataset.kind = o.kind;
        b.addEventListener('click', () => answer(r, o, buttons));
        buttons.push(b);
        row.appendChild(b);
      }
      li.appendChild(row);
      list.appendChild(li);
    }
  }

  let timer = null;
  async function poll() {
    clearTimeout(timer);
    try {
      const inbox = await call('GET', '/api/inbox');
      probe.polls++;
      render(inbox.requests || []);
    } catch (_) {
      // The board's connection status says when the daemon is away.
    }
    timer = setTimeout(poll, 2000);
  }
  if (token) poll();
})();
