// The aimi swarm board. Plain JavaScript, no library, no build step.
//
// Every piece of text that came from a container or a task file reaches the
// DOM through textContent (the t() helper) or setAttribute: never innerHTML.
'use strict';

(() => {
  // The board's credential. The URL 'aimi swarm ui' printed carries it in
  // its fragment (never sent to any server); it moves to this tab's
  // sessionStorage (this origin only) and leaves the address bar. It goes
  // out in a header only, to this origin only: no cookie, because a browser
  // sends a host's cookies to every port of the host.
  const TOKEN_KEY = 'aimi-board-token';
  const TOKEN_HEADER = 'X-Aimi-Board-Token';
  function takeToken() {
    const fromURL = new URLSearchParams(location.hash.slice(1)).get('token');
    if (fromURL) {
      sessionStorage.setItem(TOKEN_KEY, fromURL);
      // Once loaded: a same-document navigation during the load confuses
      // tools that wait for the load (the browser tests' driver).
      const drop = () => history.replaceState(null, '', location.pathname);
      if (document.readyState === 'complete') drop();
      else window.addEventListener('load', drop, { once: true });
    }
    return sessionStorage.getItem(TOKEN_KEY);
  }
  const token = takeToken();
  // A new URL pasted into this tab changes only the fragment: no reload.
  window.addEventListener('hashchange', () => { if (takeToken() !== token) location.reload(); });
  const root = document.getElementById('swarms');
  const empty = document.getElementById('empty');
  const conn = document.getElementById('conn');
  const notice = document.getElementById('notice');
  const SVG = 'http://www.w3.org/2000/svg';
  const terminal = new Set(['completed', 'failed', 'stopped']);

  // What tests and the benchmark read: how late each change reached the
  // page (ms from the daemon's event time to the DOM update), how many
  // events streams the page has opened (one while the daemon stays up), and
  // how many times a card was drawn.
  const probe = { loadedAt: Date.now(), lists: 0, changes: 0, latencies: [], streams: 0, renders: 0 };
  window.aimiBoard = probe;

  // model: repo -> swarm as the server sent it (containers by name).
  const model = new Map();
  // views: repo -> {el, refs, cards: Map(name -> card)}
  const views = new Map();

  function t(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function button(label, title, onClick) {
    const b = t('button', 'act', label);
    b.type = 'button';
    if (title) b.title = title;
    b.addEventListener('click', onClick);
    return b;
  }

  // ---- streams ------------------------------------------------------------

  // stream reads a server-sent event stream through fetch, which (unlike
  // EventSource) sends the token in a header. on.open() when the answer is
  // 200, on.event(name, data, id) for each event, on.close(err, status)
  // once when it ends (status set when the board answered an error). The
  // returned handle's close() ends it without a call to on.close. An
  // exception in on.event ends the stream too (on.close gets it), and the
  // request is aborted so that the board drops the subscription.
  function stream(path, headers, on) {
    const ctl = new AbortController();
    const handle = { closed: false, close() { handle.closed = true; ctl.abort(); } };
    const end = (err, status) => {
      if (handle.closed) return;
      handle.closed = true;
      ctl.abort();
      on.close(err, status);
    };
    (async () => {
      let res;
      try {
        res = await fetch(path, {
          credentials: 'omit', cache: 'no-store', signal: ctl.signal,
          headers: Object.assign({ [TOKEN_HEADER]: token, Accept: 'text/event-stream' }, headers),
        });
      } catch (err) { end(err); return; }
      if (!res.ok) {
        let answer = null;
        try { answer = await res.json(); } catch (_) { answer = null; }
        end(new Error(answer && answer.error ? answer.error : 'HTTP ' + res.status), res.status);
        return;
      }
      if (on.open) on.open();
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      let ev = { name: '', data: [], id: '' };
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let i;
          while ((i = buf.indexOf('\n')) >= 0) {
            const line = buf.slice(0, i).replace(/\r$/, '');
            buf = buf.slice(i + 1);
            if (line === '') {
              if (ev.data.length && !handle.closed) on.event(ev.name || 'message', ev.data.join('\n'), ev.id);
              ev = { name: '', data: [], id: '' };
            } else if (line[0] !== ':') {
              const colon = line.indexOf(':');
              const field = colon < 0 ? line : line.slice(0, colon);
              let v = colon < 0 ? '' : line.slice(colon + 1);
              if (v[0] === ' ') v = v.slice(1);
              if (field === 'event') ev.name = v;
              else if (field === 'data') ev.data.push(v);
              else if (field === 'id') ev.id = v;
            }
          }
        }
        end(new Error('the board ended the stream'));
      } catch (err) { end(err); }
    })();
    return handle;
  }

  // ---- actions ------------------------------------------------------------

  async function act(path, body, resultEl, buttons, label) {
    buttons.forEach((b) => { b.disabled = true; });
    resultEl.dataset.state = 'busy';
    resultEl.textContent = label + '…';
    try {
      const res = await fetch(path, {
        method: 'POST',
        credentials: 'omit',
        cache: 'no-store',
        headers: { 'Content-Type': 'application/json', [TOKEN_HEADER]: token },
        body: JSON.stringify(body),
      });
      let answer = null;
      try { answer = await res.json(); } catch (_) { answer = null; }
      if (!res.ok) {
        resultEl.dataset.state = 'error';
        resultEl.textContent = label + ' refused: ' + (answer && answer.error ? answer.error : 'HTTP ' + res.status);
        return null;
      }
      resultEl.dataset.state = 'ok';
      return answer;
    } catch (err) {
      resultEl.dataset.state = 'error';
      resultEl.textContent = label + ' failed: ' + err;
      return null;
    } finally {
      buttons.forEach((b) => { b.disabled = false; });
      refreshButtons();
    }
  }

  // withFailures: completed (every story finished, as the message spec
  // says) but some stories failed; retry failed reruns them.
  // The stories, kept current by events, win over the progress counters.
  function withFailures(c) {
    if (c.status !== 'completed') return false;
    if (c.stories && c.stories.length) return counts(c.stories).failed > 0;
    return !!c.progress && c.progress.failed > 0;
  }

  // summary counts the containers by status, those completed with failures
  // apart (the CLI's summary line says the same).
  function summary(view) {
    const counts = {};
    for (const c of view.containers || []) {
      const k = withFailures(c) ? 'completed with failures' : c.status;
      counts[k] = (counts[k] || 0) + 1;
    }
    return Object.keys(counts).sort().map((k) => counts[k] + ' ' + k).join(', ') || 'no container';
  }

  async function stopContainers(repo, names, resultEl, buttons) {
    const what = names.length ? 'stop ' + names.join(', ') : 'stop swarm';
    const v = await act('/api/stop', { repo, names }, resultEl, buttons, what);
    if (v) {
      resultEl.textContent = what + ': done (' + summary(v) + ')';
      mergeSwarm(v);
    }
  }

  async function resume(repo, retryFailed, resultEl, buttons) {
    const what = retryFailed ? 'retry failed' : 'resume';
    const v = await act('/api/resume', { repo, retryFailed }, resultEl, buttons, what);
    if (v) {
      resultEl.textContent = what + ': done (' + summary(v) + ')';
      mergeSwarm(v);
    }
  }

  async function cleanup(repo, resultEl, buttons) {
    const rep = await act('/api/cleanup', { repo }, resultEl, buttons, 'cleanup');
    if (!rep) return;
    const parts = [];
    parts.push('removed: ' + ((rep.removed && rep.removed.length) ? rep.removed.join(', ') : 'none'));
    for (const k of rep.kept || []) {
      let line = 'kept ' + k.name + ': ' + k.reason;
      if (k.commits && k.commits.length) line += ' (unreceived commits ' + k.commits.join(', ') + ')';
      parts.push(line);
    }
    if (rep.kept && rep.kept.length) parts.push('kept containers stay until their work is received; only the CLI\'s cleanup --force removes them anyway');
    if (rep.stateRemoved) parts.push('no container left: swarm-state.json removed');
    for (const n of rep.notes || []) parts.push('note: ' + n);
    resultEl.dataset.state = (rep.kept && rep.kept.length) ? 'error' : 'ok';
    resultEl.textContent = '';
    for (const p of parts) resultEl.appendChild(t('div', null, p));
    if (rep.stateRemoved) {
      // The swarm's section goes with its state: say so where it stays.
      notice.dataset.state = 'ok';
      notice.textContent = 'cleanup of ' + repo + ': ' + parts.join('; ');
    }
  }

  // ---- swarm sections -----------------------------------------------------

  function swarmView(repo) {
    let v = views.get(repo);
    if (v) return v;
    const el = t('section', 'swarm');
    el.dataset.repo = repo;
    const head = t('div', 'swarm-head');
    const h2 = t('h2', null, repo);
    const meta = t('span', 'meta');
    const result = t('div', 'result');
    result.setAttribute('role', 'status');
    result.setAttribute('aria-live', 'polite');
    const acts = t('div', 'actions');
    const stop = button('Stop swarm', 'stop every running container of this swarm', () => stopContainers(repo, [], result, [stop]));
    stop.dataset.action = 'stop-swarm';
    const res = button('Resume', 'start the pending containers that have no supervisor', () => resume(repo, false, result, [res]));
    res.dataset.action = 'resume';
    const retry = button('Retry failed', 'rerun the failed containers, and the failed stories of completed ones', () => resume(repo, true, result, [retry]));
    retry.dataset.action = 'retry-failed';
    const clean = button('Clean up', 'remove finished containers; keeps any holding commits nobody received', () => cleanup(repo, result, [clean]));
    clean.dataset.action = 'cleanup';
    acts.append(stop, res, retry, clean);
    head.append(h2, meta, acts);
    const list = t('div', 'containers');
    const landBox = t('div', 'land');
    landBox.hidden = true;
    const attemptsBox = t('div', 'attempts');
    attemptsBox.hidden = true;
    el.append(head, result, landBox, attemptsBox, list);
    v = { el, meta, list, landBox, attemptsBox, buttons: { stop, retry }, cards: new Map() };
    views.set(repo, v);
    // Sections stay sorted by repository.
    const after = [...views.keys()].sort().find((r) => r > repo && views.get(r).el.isConnected);
    root.insertBefore(el, after ? views.get(after).el : null);
    return v;
  }

  // money is a cost as `aimi swarm usage` prints it.
  function money(c) { return (Number(c) || 0).toFixed(4); }

  // renderLand shows the swarm's land (the train): where it lands and
  // each branch's outcome, as text.
  function renderLand(v, land) {
    v.landBox.textContent = '';
    v.landBox.hidden = !land;
    if (!land) return;
    const state = land.running ? ' (running)' : land.cut ? ' (cut short: aimi swarm land goes on where it stopped)' : '';
    v.landBox.appendChild(t('h3', null, 'Land onto ' + land.onto + ' as ' + land.branch + state));
    // Costs as `aimi swarm usage` prints them: each container's work, and
    // its checks' and fix-ups', which are the land's own.
    v.landBox.appendChild(t('p', 'land-cost', 'Land cost (checks and fix-ups): ' + money(land.cost)));
    const ol = t('ol', 'land-results');
    for (const r of land.results) {
      const li = t('li', null);
      li.dataset.outcome = r.outcome;
      li.appendChild(t('span', 'outcome', r.outcome));
      li.appendChild(t('span', 'who', ' ' + r.container + (r.fixup ? ' (in ' + r.fixup + ')' : '')));
      li.appendChild(t('span', 'cost', ' · cost ' + money(r.cost) + (r.runsCost ? ' + ' + money(r.runsCost) + ' land' : '')));
      if (r.reason) li.appendChild(t('span', 'reason', ': ' + r.reason));
      ol.appendChild(li);
    }
    v.landBox.appendChild(ol);
  }

  // renderAttempts groups each task file run several times (best of N):
  // its pick line, then its attempts, the picked one marked.
  function renderAttempts(v, sets) {
    v.attemptsBox.textContent = '';
    v.attemptsBox.hidden = !sets || !sets.length;
    if (v.attemptsBox.hidden) return;
    for (const set of sets) {
      v.attemptsBox.appendChild(t('h3', null, set.line));
      const ol = t('ol', 'attempt-list');
      for (const a of set.attempts) {
        const li = t('li', null);
        li.dataset.container = a.container;
        li.dataset.picked = a.picked ? 'true' : 'false';
        li.appendChild(t('span', 'who', (a.picked ? '★ ' : '') + a.container));
        if (a.qualified) li.appendChild(t('span', 'reason', ' verified'));
        if (a.keptRef) li.appendChild(t('span', 'reason', ' · kept at ' + a.keptRef));
        ol.appendChild(li);
      }
      v.attemptsBox.appendChild(ol);
    }
  }

  function renderSwarm(s) {
    const v = swarmView(s.repo);
    v.meta.textContent = 'swarm ' + s.swarmId + ' · ' + summary(s);
    renderLand(v, s.land);
    renderAttempts(v, s.attempts);
    const seen = new Set();
    for (const c of s.containers) {
      seen.add(c.name);
      // A list re-sends every container: redraw only the cards it changed,
      // so that a list of hundreds costs a few cards, not hundreds.
      const have = v.cards.get(c.name);
      if (have && have.key === JSON.stringify(c)) { have.data = c; continue; }
      renderCard(s.repo, v, c);
    }
    for (const [name, card] of v.cards) {
      if (!seen.has(name)) { card.el.remove(); v.cards.delete(name); }
    }
  }

  // ---- container cards ----------------------------------------------------

  function field(dl, label) {
    const dt = t('dt', null, label);
    const dd = t('dd');
    dl.append(dt, dd);
    return dd;
  }

  function card(repo, v, name) {
    let c = v.cards.get(name);
    if (c) return c;
    const el = t('article', 'container');
    el.dataset.container = name;
    const head = t('div', 'card-head');
    const h3 = t('h3', null, name);
    const status = t('span', 'status');
    const conflict = t('span', 'conflict-badge');
    conflict.hidden = true;
    head.append(h3, status, conflict);
    const bar = t('div', 'bar');
    const prog = t('progress');
    prog.max = 1;
    prog.value = 0;
    const progLabel = t('span', 'bar-label');
    bar.append(prog, progLabel);
    const dl = t('dl', 'fields');
    const refs = {
      status, prog, progLabel, conflict,
      story: field(dl, 'story'), elapsed: field(dl, 'elapsed'), branch: field(dl, 'branch'),
      node: field(dl, 'node'), task: field(dl, 'task file'), pr: field(dl, 'pull request'), exit: field(dl, 'exit'),
    };
    const output = t('p', 'output');
    const wait = t('p', 'limit-wait');
    wait.hidden = true;
    const errors = t('ul', 'errors');
    const graphBox = t('div', 'graph');
    const result = t('div', 'result');
    result.setAttribute('role', 'status');
    result.setAttribute('aria-live', 'polite');
    const acts = t('div', 'actions');
    const stop = button('Stop', 'stop this container', () => stopContainers(repo, [name], result, [stop]));
    stop.dataset.action = 'stop';
    const jbtn = button('Journal', 'show this container\'s journal as it grows', () => toggleJournal(repo, name, c));
    jbtn.dataset.action = 'journal';
    jbtn.setAttribute('aria-expanded', 'false');
    acts.append(stop, jbtn);
    const journal = t('ol', 'journal');
    journal.hidden = true;
    journal.setAttribute('aria-label', 'journal of ' + name);
    journal.tabIndex = 0;
    el.append(head, bar, dl, wait, output, errors, graphBox, acts, result, journal);
    c = { el, refs, output, wait, errors, graphBox, stop, jbtn, journal, graphKey: '', src: null, data: null };
    v.cards.set(name, c);
    v.list.appendChild(el);
    return c;
  }

  function counts(stories) {
    const n = { total: stories.length, completed: 0, failed: 0, in_progress: 0, pending: 0, skipped: 0 };
    for (const s of stories) n[s.status] = (n[s.status] || 0) + 1;
    return n;
  }

  function renderCard(repo, v, data) {
    const c = card(repo, v, data.name);
    probe.renders++;
    c.data = data;
    c.key = JSON.stringify(data);
    c.el.dataset.status = data.status;
    if (data.picked !== undefined) c.el.dataset.picked = data.picked ? 'true' : 'false';
    c.refs.status.textContent = data.status + (data.finished ? '' : (terminal.has(data.status) ? ' (finishing)' : ''));
    c.refs.status.dataset.status = data.status;
    let total = data.progress.total;
    let done = data.progress.completed;
    let failed = data.progress.failed;
    let skipped = total - data.progress.completed - data.progress.failed - data.progress.inProgress - data.progress.pending;
    if (data.stories.length) {
      const n = counts(data.stories);
      total = n.total; done = n.completed; failed = n.failed; skipped = n.skipped;
    }
    c.refs.prog.max = Math.max(total, 1);
    c.refs.prog.value = done + failed + Math.max(skipped, 0);
    c.refs.progLabel.textContent = done + '/' + total + ' completed' + (failed ? ', ' + failed + ' failed' : '') + (skipped > 0 ? ', ' + skipped + ' skipped' : '');
    const running = data.stories.filter((s) => s.status === 'in_progress');
    const names = running.map((s) => s.id + ' ' + s.title).join('; ');
    c.refs.story.textContent = !running.length ? '—' : (terminal.has(data.status) ? data.status + ' during ' + names : names);
    c.refs.branch.textContent = data.branch;
    c.refs.node.textContent = data.node || 'local engine';
    c.refs.task.textContent = data.taskFile;
    c.refs.pr.textContent = '';
    if (data.prUrl) {
      const a = t('a', null, data.prUrl);
      a.href = data.prUrl; // http(s) only: the server drops any other scheme
      a.rel = 'noopener noreferrer';
      a.target = '_blank';
      c.refs.pr.appendChild(a);
    } else {
      c.refs.pr.textContent = '—';
    }
    c.refs.exit.textContent = data.exitCode === null || data.exitCode === undefined ? '—' : String(data.exitCode) + (data.oomKilled ? ' (OOM killed)' : '');
    c.output.textContent = data.lastOutput || '';
    const conflicts = data.conflicts || [];
    c.refs.conflict.textContent = conflicts.length ? 'conflicts with ' + conflicts.map((k) => k.with).join(', ') : '';
    c.refs.conflict.title = conflicts.map((k) => k.with + ': ' + k.files.join(', ')).join('\n');
    c.refs.conflict.hidden = !conflicts.length;
    const waits = data.limitWaits || [];
    c.wait.textContent = waits.join('; ');
    c.wait.hidden = !waits.length;
    c.errors.textContent = '';
    for (const e of data.errors) {
      const li = t('li', 'error');
      if (e.code) li.appendChild(t('span', 'code', e.code));
      li.appendChild(t('span', 'msg', e.message));
      c.errors.appendChild(li);
    }
    if (data.rejected) c.errors.appendChild(t('li', 'rejected', data.rejected + ' line(s) rejected: see the journal'));
    if (data.egressDenied) c.errors.appendChild(t('li', 'rejected', data.egressDenied + ' request(s) out refused by the egress proxy: see the journal'));
    const granted = data.egressGranted || [];
    if (granted.length) c.errors.appendChild(t('li', 'granted', 'reaches ' + granted.join(', ') + ' (granted in the inbox)'));
    if (data.gitRefused) c.errors.appendChild(t('li', 'rejected', data.gitRefused + ' git request(s) refused by the git service: see the journal'));
    c.stop.disabled = terminal.has(data.status);
    renderGraph(c, data.stories);
    tickElapsed(c);
  }

  function fmtDuration(ms) {
    let s = Math.max(0, Math.floor(ms / 1000));
    const h = Math.floor(s / 3600); s -= h * 3600;
    const m = Math.floor(s / 60); s -= m * 60;
    return (h ? h + 'h ' : '') + (h || m ? m + 'm ' : '') + s + 's';
  }

  function tickElapsed(c) {
    const d = c.data;
    if (!d || !d.createdAt) return;
    const start = Date.parse(d.createdAt);
    const end = terminal.has(d.status) ? Date.parse(d.updatedAt) : Date.now();
    c.refs.elapsed.textContent = fmtDuration(end - start);
  }

  // ---- story graph --------------------------------------------------------

  // Layers by longest path from the roots, so every dependency is to the
  // left of what depends on it.
  function layers(stories) {
    const byId = new Map(stories.map((s) => [s.id, s]));
    const depth = new Map();
    const visiting = new Set();
    const d = (id) => {
      if (depth.has(id)) return depth.get(id);
      if (visiting.has(id)) return 0; // a cycle: the task file validator forbids it
      visiting.add(id);
      let best = 0;
      for (const dep of (byId.get(id) || { dependsOn: [] }).dependsOn) {
        if (byId.has(dep)) best = Math.max(best, d(dep) + 1);
      }
      visiting.delete(id);
      depth.set(id, best);
      return best;
    };
    stories.forEach((s) => d(s.id));
    return depth;
  }

  const BOX_W = 150, BOX_H = 40, GAP_X = 36, GAP_Y = 12;

  function renderGraph(c, stories) {
    const key = stories.map((s) => s.id + '<' + s.dependsOn.join(',')).join(';');
    if (key !== c.graphKey) {
      c.graphKey = key;
      c.graphBox.textContent = '';
      c.nodes = new Map();
      if (!stories.length) return;
      const depth = layers(stories);
      const rows = new Map();
      const pos = new Map();
      let maxLayer = 0, maxRow = 0;
      for (const s of stories) {
        const l = depth.get(s.id);
        const r = rows.get(l) || 0;
        rows.set(l, r + 1);
        pos.set(s.id, { x: l * (BOX_W + GAP_X), y: r * (BOX_H + GAP_Y) });
        maxLayer = Math.max(maxLayer, l);
        maxRow = Math.max(maxRow, r);
      }
      const w = (maxLayer + 1) * (BOX_W + GAP_X) - GAP_X + 2;
      const h = (maxRow + 1) * (BOX_H + GAP_Y) - GAP_Y + 2;
      const svg = document.createElementNS(SVG, 'svg');
      svg.setAttribute('viewBox', '-1 -1 ' + w + ' ' + h);
      svg.setAttribute('width', String(w));
      svg.setAttribute('height', String(h));
      svg.setAttribute('role', 'img');
      const label = document.createElementNS(SVG, 'title');
      svg.appendChild(label);
      c.graphLabel = label;
      for (const s of stories) {
        const to = pos.get(s.id);
        for (const dep of s.dependsOn) {
          const from = pos.get(dep);
          if (!from) continue;
          const path = document.createElementNS(SVG, 'path');
          const x1 = from.x + BOX_W, y1 = from.y + BOX_H / 2, x2 = to.x, y2 = to.y + BOX_H / 2;
          const mx = (x1 + x2) / 2;
          path.setAttribute('d', 'M' + x1 + ' ' + y1 + ' C' + mx + ' ' + y1 + ' ' + mx + ' ' + y2 + ' ' + (x2 - 4) + ' ' + y2);
          path.setAttribute('class', 'edge');
          svg.appendChild(path);
          const tip = document.createElementNS(SVG, 'path');
          tip.setAttribute('d', 'M' + (x2 - 6) + ' ' + (y2 - 4) + ' L' + x2 + ' ' + y2 + ' L' + (x2 - 6) + ' ' + (y2 + 4) + ' Z');
          tip.setAttribute('class', 'tip');
          svg.appendChild(tip);
        }
      }
      for (const s of stories) {
        const p = pos.get(s.id);
        const g = document.createElementNS(SVG, 'g');
        g.setAttribute('class', 'story');
        g.setAttribute('data-story', s.id);
        g.setAttribute('transform', 'translate(' + p.x + ' ' + p.y + ')');
        const tip = document.createElementNS(SVG, 'title');
        const rect = document.createElementNS(SVG, 'rect');
        rect.setAttribute('width', String(BOX_W));
        rect.setAttribute('height', String(BOX_H));
        rect.setAttribute('rx', '6');
        const id = document.createElementNS(SVG, 'text');
        id.setAttribute('x', '8');
        id.setAttribute('y', '16');
        id.setAttribute('class', 'sid');
        const title = document.createElementNS(SVG, 'text');
        title.setAttribute('x', '8');
        title.setAttribute('y', '32');
        title.setAttribute('class', 'stitle');
        title.textContent = s.title.length > 22 ? s.title.slice(0, 21) + '…' : s.title;
        g.append(tip, rect, id, title);
        svg.appendChild(g);
        c.nodes.set(s.id, { g, id, tip });
      }
      c.graphBox.appendChild(svg);
    }
    for (const s of stories) {
      const n = c.nodes.get(s.id);
      if (!n) continue;
      n.g.setAttribute('data-status', s.status);
      n.id.textContent = s.id + ' · ' + s.status.replace('_', ' ');
      n.tip.textContent = s.id + ' ' + s.title + ' (' + s.status + ')' + (s.dependsOn.length ? ', after ' + s.dependsOn.join(', ') : '');
    }
    if (c.graphLabel) {
      c.graphLabel.textContent = 'story graph: ' + stories.map((s) => s.id + ' ' + s.status + (s.dependsOn.length ? ' after ' + s.dependsOn.join(' and ') : '')).join('; ');
    }
  }

  // ---- journal ------------------------------------------------------------

  function toggleJournal(repo, name, c) {
    if (c.src) {
      c.src.done = true;
      c.src.close();
      c.src = null;
      c.journal.hidden = true;
      c.jbtn.setAttribute('aria-expanded', 'false');
      c.jbtn.textContent = 'Journal';
      return;
    }
    c.journal.hidden = false;
    c.journal.textContent = '';
    c.jbtn.setAttribute('aria-expanded', 'true');
    c.jbtn.textContent = 'Hide journal';
    let last = '';
    const open = () => {
      const headers = last ? { 'Last-Event-ID': last } : {};
      c.src = stream('/api/journal?' + new URLSearchParams({ repo, name }), headers, {
        event(ev, data, id) {
          if (ev === 'line') {
            if (id) last = id;
            appendLine(c, JSON.parse(data));
          } else if (ev === 'end' || ev === 'failed') {
            c.src.close();
            c.src.done = true;
            c.journal.appendChild(ev === 'end'
              ? t('li', 'end', '— end of journal: the container is done —')
              : t('li', 'invalid', 'journal unavailable: ' + JSON.parse(data).error));
          }
        },
        close(err, status) {
          if (!c.src || c.src.done) return;
          if (status) {
            c.src.done = true;
            c.journal.appendChild(t('li', 'invalid', 'journal unavailable: ' + err.message));
            return;
          }
          // The connection dropped: go on after the last line shown.
          setTimeout(() => { if (c.src && !c.src.done && c.src.closed) open(); }, 3000);
        },
      });
    };
    open();
  }

  function appendLine(c, l) {
    const j = c.journal;
    const stick = j.scrollTop + j.clientHeight >= j.scrollHeight - 4;
    const li = t('li', 'line');
    li.dataset.kind = l.kind;
    li.dataset.stream = l.stream;
    li.appendChild(t('span', 'time', l.time));
    li.appendChild(t('span', 'stream', l.stream === 'stderr' ? 'stderr' : (l.type || l.kind)));
    if (l.code) li.appendChild(t('span', 'code', l.code));
    li.appendChild(t('span', 'text', l.text));
    if (l.note) li.appendChild(t('span', 'note', l.kind + ': ' + l.note));
    j.appendChild(li);
    while (j.childElementCount > 2000) j.firstElementChild.remove();
    if (stick) j.scrollTop = j.scrollHeight;
  }

  // ---- live state ---------------------------------------------------------

  function setList(list) {
    probe.lists++;
    const repos = new Set();
    for (const s of list.swarms) {
      repos.add(s.repo);
      model.set(s.repo, s);
      renderSwarm(s);
    }
    for (const [repo, v] of views) {
      if (!repos.has(repo)) { v.el.remove(); views.delete(repo); model.delete(repo); }
    }
    empty.hidden = list.swarms.length > 0;
    refreshButtons();
  }

  function mergeSwarm(s) {
    model.set(s.repo, s);
    renderSwarm(s);
    empty.hidden = true;
    refreshButtons();
  }

  function refreshButtons() {
    for (const [repo, v] of views) {
      const s = model.get(repo);
      if (!s) continue;
      v.buttons.stop.disabled = !s.containers.some((c) => !terminal.has(c.status));
      v.buttons.retry.disabled = !s.containers.some((c) => c.status === 'failed' || withFailures(c));
    }
  }

  // A message's changes update the model, then every card they touched is
  // drawn once, however many changes the message brought.
  const dirty = new Map(); // card key -> {repo, name}
  let pending = [];

  function applyChange(e) {
    probe.changes++;
    const s = model.get(e.repo);
    const c = s && s.containers.find((x) => x.name === e.container);
    if (c) {
      if (e.status) c.status = e.status;
      // A permission request names its story but not the story's status.
      if (e.storyId && e.storyStatus) {
        const st = c.stories.find((x) => x.id === e.storyId);
        if (st) st.status = e.storyStatus;
      }
      if (e.kind === 'progress' && e.messageType === 'progress-update' && e.output) c.lastOutput = e.output;
      if (e.code) c.errors.push({ code: e.code, message: e.output || '' });
      if (e.kind === 'line-rejected') c.rejected = (c.rejected || 0) + 1;
      if (e.kind === 'limit-wait') c.limitWaits = [e.output || ''];
      if (e.kind === 'limit-wait-over') c.limitWaits = [];
      c.updatedAt = e.time;
      dirty.set(e.repo + '\n' + e.container, { repo: e.repo, name: e.container });
    }
    if (s && e.badges) applyBadges(s, e);
    pending.push(e.time);
  }

  // applyBadges adds (conflict-detected) or removes (conflict-cleared) the
  // conflict badge of both cards of a pair.
  function applyBadges(s, e) {
    for (const [name, b] of Object.entries(e.badges)) {
      const c = s.containers.find((x) => x.name === name);
      if (!c) continue;
      const rest = (c.conflicts || []).filter((k) => k.with !== b.with);
      c.conflicts = e.kind === 'conflict-detected' ? rest.concat([b]) : rest;
      dirty.set(e.repo + '\n' + name, { repo: e.repo, name });
    }
  }

  // drawSoon draws once after the messages that arrived together (one read
  // of the stream): the reader's next await runs the microtask, so a burst
  // costs one draw per read and no change waits for a timer.
  let drawQueued = false;
  function drawSoon() {
    if (drawQueued) return;
    drawQueued = true;
    queueMicrotask(() => { drawQueued = false; draw(); });
  }

  function draw() {
    // Looked up again: a list that arrived since replaced the model.
    for (const { repo, name } of dirty.values()) {
      const s = model.get(repo);
      const c = s && s.containers.find((x) => x.name === name);
      if (c) renderCard(repo, swarmView(repo), c);
    }
    dirty.clear();
    refreshButtons();
    const now = Date.now();
    for (const time of pending) {
      const at = Date.parse(time);
      if (!Number.isNaN(at)) probe.latencies.push(now - at);
    }
    pending = [];
    if (probe.latencies.length > 100000) probe.latencies.splice(0, 50000);
  }

  function setConn(state, text) {
    conn.dataset.state = state;
    conn.textContent = text;
    conn.title = '';
  }

  function connect() {
    if (!token) {
      setConn('refused', "no token: open the URL 'aimi swarm ui' printed");
      return;
    }
    stream('/api/events', {}, {
      open() { probe.streams++; setConn('live', 'live'); },
      event(ev, data) {
        if (ev === 'list') setList(JSON.parse(data));
        else if (ev === 'changes') {
          for (const e of JSON.parse(data)) applyChange(e);
          drawSoon();
        } else if (ev === 'gone') setConn('down', 'daemon gone: ' + JSON.parse(data).error + ' (retrying)');
      },
      close(err, status) {
        if (status === 403) {
          // Another board now listens here, or the token is not this one's.
          setConn('refused', "refused: open the URL 'aimi swarm ui' printed");
          return;
        }
        if (conn.dataset.state !== 'down') setConn('reconnecting', 'reconnecting…');
        conn.title = err ? String(err.message || err) : '';
        setTimeout(connect, 3000);
      },
    });
  }

  setInterval(() => {
    for (const v of views.values()) for (const c of v.cards.values()) tickElapsed(c);
  }, 1000);
  connect();
})();
