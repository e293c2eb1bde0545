// cuecast dashboard: one page, two views (/ and /configs/<config>), fed by
// server-sent events from /api/events. No dependencies; works offline.
'use strict';

// h builds an element: h('td', {class: 'x'}, 'text', child, ...). Strings
// become text nodes, never HTML.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'style') Object.assign(el.style, v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const view = document.getElementById('view');
const config = location.pathname.startsWith('/configs/')
  ? decodeURIComponent(location.pathname.slice('/configs/'.length)) : '';

function pct(x) { return Math.round(x * 1000) / 10 + '%'; }
function short(sha) { return (sha || '').slice(0, 7); }
function ago(t) {
  if (!t) return '';
  const s = Math.round((Date.now() - new Date(t).getTime()) / 1000);
  if (s < 60) return Math.max(s, 0) + 's ago';
  if (s < 3600) return Math.round(s / 60) + 'm ago';
  if (s < 86400) return Math.round(s / 3600) + 'h ago';
  return new Date(t).toISOString().slice(0, 16).replace('T', ' ');
}
function commit(sha, url) {
  return url ? h('a', {href: url, class: 'sha', rel: 'noreferrer'}, short(sha)) : h('code', {class: 'sha'}, short(sha));
}
function bar(share, label, cls, empty) {
  const fill = h('span', {style: {width: empty ? '0' : Math.round(share * 100) + '%'}});
  return h('div', {class: 'cov ' + (cls || '')}, h('div', {class: 'bar'}, fill), h('span', {class: 'covtext'}, label));
}
function state(s) { return s ? h('span', {class: 'state s-' + s}, s.replace('_', ' ')) : h('span', {class: 'muted'}, '—'); }
function count(n, cls) { return n ? h('span', {class: 'count ' + cls}, n) : h('span', {class: 'muted'}, '0'); }

function renderTailer(t) {
  const el = document.getElementById('tailer');
  el.replaceChildren();
  if (!t) return;
  el.append(h('span', {}, t.branch ? `${t.branch} @ ` : ''), commit(t.cursor, t.cursor_url));
  if (t.lag >= 0) el.append(h('span', {class: t.lag ? 'count warn' : ''}, ` · ${t.lag} behind`));
  if (t.rewrite) el.append(h('span', {class: 'count danger'}, ' · HALTED: history rewritten'));
  if (t.rejected && t.rejected.length) el.append(h('span', {class: 'count danger', title: t.rejected[0].first}, ` · ${t.rejected.length} rejected`));
  if (t.error) el.append(h('span', {class: 'count danger'}, ' · ' + t.error));
}

function renderStale(msg) {
  const el = document.getElementById('stale');
  el.hidden = !msg;
  el.textContent = msg || '';
}

function renderOverview(ov) {
  renderTailer(ov.tailer);
  renderStale(ov.stale);
  const parts = [h('h1', {}, 'Configs')];
  const t = ov.tailer;
  if (t && t.rewrite) {
    parts.push(h('section', {class: 'panel danger'}, h('h2', {}, 'Publishing halted: main was rewritten'),
      h('p', {}, 'The branch tip ', h('code', {}, short(t.rewrite.tip)), ' does not descend from ', h('code', {}, short(t.rewrite.cursor)),
        `, the last commit processed (detected ${ago(t.rewrite.detected_at)}). Nothing is published until an operator accepts a commit; see docs/OPERATIONS.md.`)));
  }
  if (t && t.rejected && t.rejected.length) {
    parts.push(h('section', {class: 'panel warn'}, h('h2', {}, 'Rejected commits (newest first)'),
      h('table', {}, h('thead', {}, h('tr', {}, ['commit', 'author', 'message', 'first error', 'errors', 'when'].map(x => h('th', {}, x)))),
        h('tbody', {}, t.rejected.map(r => h('tr', {}, h('td', {}, commit(r.commit, r.commit_url)), h('td', {}, r.author),
          h('td', {}, r.message), h('td', {class: 'err'}, r.first), h('td', {}, r.total), h('td', {class: 'muted'}, ago(r.at))))))));
  }
  if (!ov.namespaces.length) parts.push(h('p', {class: 'muted'}, 'No config has a version yet.'));
  for (const ns of ov.namespaces) {
    const rows = ns.configs.map(c => h('tr', {'data-config': c.config},
      h('td', {}, h('a', {href: '/configs/' + c.config}, c.config)),
      h('td', {class: 'version'}, c.deleted ? 'deleted' : 'v' + c.version),
      h('td', {}, commit(c.commit, c.commit_url), ' ', h('span', {class: 'msg'}, c.message)),
      h('td', {}, state(c.rollout), c.stage ? h('span', {class: 'muted'}, ' ' + c.stage) : '', c.pinned ? h('span', {class: 'count warn'}, ' pinned') : ''),
      h('td', {class: 'coverage'}, c.instances ? bar(c.coverage, `${c.on_latest}/${c.instances} · ${pct(c.coverage)}` + (c.on_intended !== c.on_latest ? ` (${c.on_intended} where their rollout means them)` : ''))
        : bar(0, 'no instances', '', true)),
      h('td', {}, count(c.stragglers, 'warn')),
      h('td', {}, count(c.drift, 'danger')),
      h('td', {}, count(c.lkg, 'warn')),
      h('td', {}, count(c.unhealthy + c.failing, 'danger')),
      h('td', {}, count(c.refused, 'warn'))));
    parts.push(h('section', {class: 'panel'}, h('h2', {}, ns.name),
      h('table', {class: 'configs'}, h('thead', {}, h('tr', {}, [['config'], ['version'], ['commit'], ['rollout'], ['coverage'], ['behind', 'stragglers: not on the version their rollout means them to run, past the threshold'],
          ['drift', 'reporting content cuecast did not publish'], ['LKG', 'serving their last-known-good file'],
          ['bad', 'unhealthy or failing to apply'],
          ['refused', 'refused a forged or unverifiable pointer: something sent them what serve did not sign; nothing was applied (not a failure)']].map(([t, title]) => h('th', {title}, t)))),
        h('tbody', {}, rows))));
  }
  view.replaceChildren(...parts);
}

function labels(m) {
  const ks = Object.keys(m || {}).sort();
  return ks.length ? ks.map(k => h('span', {class: 'label'}, `${k}=${m[k]}`)) : h('span', {class: 'muted'}, '—');
}

function instanceTable(title, list, cls) {
  if (!list || !list.length) return null;
  return h('section', {class: 'panel ' + (cls || '')}, h('h2', {}, `${title} (${list.length})`),
    h('table', {}, h('thead', {}, h('tr', {}, ['instance', 'labels', 'cohort', 'version', 'checksum', 'health', 'reported'].map(t => h('th', {}, t)))),
      h('tbody', {}, list.map(i => h('tr', {'data-instance': i.instance},
        h('td', {}, i.instance), h('td', {}, labels(i.labels)), h('td', {}, i.cohort), h('td', {}, 'v' + i.version),
        h('td', {}, h('code', {}, short(i.checksum))),
        h('td', {}, i.healthy ? 'healthy' : h('span', {class: 'count danger'}, 'unhealthy'), i.lkg ? ' · last-known-good' : '',
          i.last_error ? h('div', {class: 'err'}, i.last_error) : '',
          i.refused ? h('div', {class: 'refused'}, 'refused a pointer: ' + i.refused) : ''),
        h('td', {class: 'muted'}, ago(i.at)))))));
}

function renderRollout(r) {
  if (!r) return h('section', {class: 'panel'}, h('h2', {}, 'Rollout'), h('p', {class: 'muted'}, 'No rollout recorded for this config.'));
  const stages = r.stages.map(s => h('div', {class: 'stage st-' + s.status},
    h('div', {class: 'stage-head'}, h('strong', {}, s.name), ' ', h('span', {class: 'muted'},
      `${s.percent}%${s.named ? ' + named' : ''}${s.hold ? ' · hold ' + s.hold : ''} · ${s.status}`)),
    s.instances ? bar(s.coverage, `${s.on_target}/${s.instances} on v${r.version}`) : bar(0, 'no instances', '', true),
    h('div', {class: 'muted'}, s.unhealthy || s.failing ? h('span', {class: 'count danger'}, `${s.unhealthy} unhealthy · ${s.failing} failing`) : 'healthy',
      s.refused ? h('span', {class: 'count warn'}, ` · ${s.refused} refused a pointer`) : '')));
  return h('section', {class: 'panel', id: 'rollout'},
    h('h2', {}, `Rollout of v${r.version} `, state(r.state), r.emergency ? h('span', {class: 'count danger'}, ' emergency') : ''),
    h('p', {}, `from v${r.from || '—'} · stage ${r.stage} · started ${ago(r.started)} · updated ${ago(r.updated)}`,
      r.hold_until && r.state === 'holding' ? ` · holding until ${new Date(r.hold_until).toLocaleTimeString()}` : ''),
    r.note ? h('p', {class: 'note'}, r.note) : null,
    r.reason ? h('p', {class: 'err'}, r.reason) : null,
    r.pin ? h('p', {class: 'count warn'}, `pinned to v${r.pin.version} by ${r.pin.actor}: ${r.pin.reason}${r.pending ? ` · v${r.pending} pending` : ''}`) : null,
    h('div', {class: 'stages'}, stages),
    r.log && r.log.length ? h('details', {}, h('summary', {}, 'history'),
      h('ul', {class: 'log'}, r.log.map(s => h('li', {}, h('span', {class: 'muted'}, ago(s.at) + ' '), `${s.stage || ''} ${s.state} ${s.detail || ''}`)))) : null);
}

function renderConfig(cv) {
  renderStale(cv.stale);
  const c = cv.row;
  document.title = c.config + ' · cuecast';
  const head = h('section', {class: 'panel head'},
    h('h1', {}, h('a', {href: '/'}, 'configs'), ' / ', c.config),
    h('div', {class: 'kv'},
      h('div', {}, h('span', {class: 'muted'}, 'version '), h('strong', {id: 'cfg-version'}, c.deleted ? 'deleted' : 'v' + c.version)),
      h('div', {}, h('span', {class: 'muted'}, 'commit '), commit(c.commit, c.commit_url), ' ', c.author),
      h('div', {}, h('span', {class: 'muted'}, 'rollout '), state(c.rollout))),
    h('div', {class: 'coverage big'}, c.instances ? bar(c.coverage, `${c.on_latest}/${c.instances} instances on v${c.version}` + (c.on_intended !== c.on_latest ? ` · ${c.on_intended}/${c.instances} where their rollout means them now` : ''))
      : bar(0, 'no live instances report on this config', '', true),
      h('strong', {id: 'cfg-coverage'}, c.instances ? pct(c.coverage) : '—')),
    h('div', {class: 'kv'},
      h('div', {}, 'stragglers ', count(c.stragglers, 'warn')), h('div', {}, 'drift ', count(c.drift, 'danger')),
      h('div', {}, 'last-known-good ', count(c.lkg, 'warn')), h('div', {}, 'unhealthy ', count(c.unhealthy, 'danger')),
      h('div', {}, 'failing ', count(c.failing, 'danger')),
      h('div', {title: 'refused a forged or unverifiable pointer; nothing applied, not a failure'}, 'refused ', count(c.refused, 'warn'))));
  const chart = h('section', {class: 'panel'}, h('h2', {}, 'Propagation'), h('div', {id: 'chart'}));
  chart.querySelector('#chart').innerHTML = cv.chart; // server-drawn SVG, escaped there
  const versions = h('section', {class: 'panel'}, h('h2', {}, 'Versions'),
    h('table', {}, h('thead', {}, h('tr', {}, ['version', 'commit', 'author', 'message', 'committed', 'instances'].map(t => h('th', {}, t)))),
      h('tbody', {}, (cv.versions || []).map(v => h('tr', {class: v.version === c.version ? 'current' : ''},
        h('td', {}, 'v' + v.version, v.deleted ? ' (deleted)' : ''), h('td', {}, commit(v.commit, v.commit_url)),
        h('td', {}, v.author), h('td', {class: 'msg'}, v.message.split('\n')[0]), h('td', {class: 'muted'}, ago(v.committed_at)),
        h('td', {}, v.instances))))));
  const audit = h('section', {class: 'panel'}, h('h2', {}, 'Audit'),
    cv.audit.length ? h('table', {}, h('thead', {}, h('tr', {}, ['when', 'actor', 'action', 'version', 'stage', 'reason'].map(t => h('th', {}, t)))),
      h('tbody', {}, cv.audit.map(a => h('tr', {}, h('td', {class: 'muted'}, ago(a.at)), h('td', {}, a.actor),
        h('td', {}, a.action, a.emergency ? ' (emergency)' : ''), h('td', {}, a.version ? 'v' + a.version : ''),
        h('td', {}, a.stage || ''), h('td', {}, a.reason))))) : h('p', {class: 'muted'}, 'No operator action or halt recorded.'));
  renderTailer(cv.tailer);
  view.replaceChildren(...[head, renderRollout(cv.rollout), chart,
    instanceTable('Stragglers', cv.stragglers, 'warn'), instanceTable('Drift', cv.drift, 'danger'),
    instanceTable('On last-known-good', cv.lkg, 'warn'), instanceTable('Unhealthy or failing', cv.unhealthy, 'danger'),
    instanceTable('Refused a pointer (forged or unverifiable: nothing applied, not an apply failure)', cv.refused, 'warn'),
    versions, audit,
    instanceTable('Instances' + (cv.more_instances ? ` (first ${cv.instances.length}; ${cv.more_instances} more)` : ''), cv.instances),
  ].filter(Boolean));
  document.getElementById('actions').hidden = !cv.actions || !cv.rollout;
}

function setupActions() {
  const token = document.getElementById('token');
  token.value = sessionStorage.getItem('cuecast-token') || '';
  token.addEventListener('change', () => sessionStorage.setItem('cuecast-token', token.value));
  const result = document.getElementById('action-result');
  document.getElementById('action-form').addEventListener('submit', e => e.preventDefault());
  for (const b of document.querySelectorAll('#actions button')) {
    b.addEventListener('click', async () => {
      const action = b.dataset.action;
      result.textContent = action + '…';
      try {
        const res = await fetch(`/api/rollouts/${action}/${config}`, {
          method: 'POST',
          headers: {'Authorization': 'Bearer ' + token.value, 'Content-Type': 'application/json'},
          body: JSON.stringify({reason: document.getElementById('reason').value,
            actor: document.getElementById('actor').value, emergency: document.getElementById('emergency').checked,
            version: Number(document.getElementById('to').value) || 0}),
        });
        result.textContent = res.ok ? `${action}: done` : `${action}: ${(await res.json()).error}`;
      } catch (e) {
        result.textContent = `${action}: ${e}`;
      }
    });
  }
}

function connect() {
  const conn = document.getElementById('conn');
  const es = new EventSource('/api/events' + (config ? '?config=' + encodeURIComponent(config) : ''));
  es.onopen = () => { conn.textContent = 'live'; conn.className = 'conn live'; };
  es.onerror = () => { conn.textContent = 'reconnecting…'; conn.className = 'conn down'; };
  es.addEventListener('overview', e => renderOverview(JSON.parse(e.data)));
  es.addEventListener('config', e => renderConfig(JSON.parse(e.data)));
  es.addEventListener('problem', e => view.replaceChildren(h('p', {class: 'err'}, JSON.parse(e.data).error)));
}

if (config) setupActions();
connect();
