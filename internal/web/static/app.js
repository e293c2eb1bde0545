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
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const view = document.getElementById('view');
const config = location.pathname.startsWith('/configs/')
  ? decodeURIComponent(location.pathname.slice('/configs/'.length)) : '';

// The last view received, so a filter or an opened version re-renders it
// without waiting for the next event.
let last = null;
// Versions whose content and diff are shown (by number), and what the
// server said about each.
const openVersions = new Set();
const contents = {};

// filterText and problemsOnly are the filter bar (index.html): a text that
// rows must contain, and whether to list only rows with a problem.
function filterText() { return (document.getElementById('search').value || '').trim().toLowerCase(); }
function problemsOnly() { return document.getElementById('problems').checked; }
function matches(q, ...fields) {
  if (!q) return true;
  return fields.some(f => String(f ?? '').toLowerCase().includes(q));
}
function rowProblem(c) { return c.stragglers + c.drift + c.lkg + c.unhealthy + c.failing + c.refused + (c.unknown || 0) > 0 || c.rollout === 'halted' || c.pinned; }
function instanceProblem(i) { return i.unknown || !i.healthy || i.lkg || !!i.last_error || !!i.refused; }
function instanceMatches(i) {
  const q = filterText();
  if (problemsOnly() && !instanceProblem(i)) return false;
  return matches(q, i.instance, 'v' + i.version, i.checksum, i.last_error, i.refused,
    ...Object.entries(i.labels || {}).map(([k, v]) => `${k}=${v}`));
}

function pct(x) { return Math.round(x * 1000) / 10 + '%'; }
// Hashes abbreviated as everywhere else (cuecast.ShortCommit): 12 hex digits.
function short(sha) { return (sha || '').slice(0, 12); }
// One time format everywhere: UTC, "2026-12-01 17:20:09 UTC", as
// rollout.FormatTime writes it (the server sends notes, log details and
// messages in it already); ago() shows it with the age beside it.
function fmtTime(t) {
  if (!t) return '';
  const d = new Date(t);
  if (isNaN(d)) return String(t);
  return d.toISOString().slice(0, 19).replace('T', ' ') + ' UTC';
}
function age(t) {
  const s = Math.round((Date.now() - new Date(t).getTime()) / 1000);
  const a = Math.abs(s);
  const n = a < 60 ? a + 's' : a < 3600 ? Math.round(a / 60) + 'm' : a < 86400 ? Math.round(a / 3600) + 'h' : Math.round(a / 86400) + 'd';
  return s < 0 ? 'in ' + n : n + ' ago';
}
function ago(t) {
  if (!t) return '';
  return h('time', {datetime: new Date(t).toISOString(), title: age(t)}, fmtTime(t));
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
  if (t.open) el.append(h('span', {class: 'count danger', title: t.rejected[0].first}, ` · ${t.open} rejected`));
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
        `, the last commit processed (detected ${fmtTime(t.rewrite.detected_at)}). Nothing is published until an operator accepts a commit; see docs/OPERATIONS.md.`)));
  }
  if (t && t.rejected && t.rejected.length) {
    const table = h('table', {}, h('thead', {}, h('tr', {}, ['commit', 'author', 'message', 'first error', 'errors', 'when', ''].map(x => h('th', {}, x)))),
      h('tbody', {}, t.rejected.map(r => h('tr', {class: r.fixed ? 'fixed' : ''}, h('td', {}, commit(r.commit, r.commit_url)), h('td', {}, r.author),
        h('td', {}, r.message, r.namespaces ? h('div', {class: 'muted'}, 'rejected in ', r.namespaces.join(', '), '; its other changes published') : null),
        h('td', {class: r.fixed ? 'muted' : 'err'}, r.first), h('td', {}, r.total), h('td', {class: 'muted'}, ago(r.at)),
        h('td', {}, r.fixed ? h('span', {class: 'count ok'}, 'fixed') : h('span', {class: 'count danger'}, 'open'))))));
    // Open rejections are news; fixed ones are history, folded away.
    parts.push(t.open
      ? h('section', {class: 'panel warn', id: 'rejected'}, h('h2', {}, `Rejected commits: ${t.open} not fixed yet (newest first)`), table)
      : h('details', {class: 'panel', id: 'rejected'}, h('summary', {}, `Rejected commits, since fixed (${t.rejected.length})`), table));
  }
  if (!ov.namespaces.length) parts.push(h('p', {class: 'muted'}, 'No config has a version yet.'));
  const q = filterText();
  let shownRows = 0, allRows = 0;
  for (const ns of ov.namespaces) {
    allRows += ns.configs.length;
    const configs = ns.configs.filter(c => (!problemsOnly() || rowProblem(c)) &&
      matches(q, c.config, c.message, c.author, c.commit, c.rollout, c.stage, 'v' + c.version));
    shownRows += configs.length;
    if (!configs.length) continue;
    const rows = configs.map(c => h('tr', {'data-config': c.config},
      c.variant
        ? h('td', {class: 'variant'}, '\u21b3 ', h('a', {href: '/configs/' + c.config, title: c.config}, c.variant))
        : h('td', {}, h('a', {href: '/configs/' + c.config}, c.config),
          c.variants ? h('span', {class: 'muted'}, ` · ${c.variants} variant${c.variants === 1 ? '' : 's'}`) : ''),
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
  if (allRows && shownRows < allRows) {
    parts.splice(1, 0, h('p', {class: 'muted', id: 'filtered'}, `${shownRows} of ${allRows} configs match the filter.`));
  }
  view.replaceChildren(...parts);
}

function labels(m) {
  const ks = Object.keys(m || {}).sort();
  return ks.length ? ks.map(k => h('span', {class: 'label'}, `${k}=${m[k]}`)) : h('span', {class: 'muted'}, '—');
}

function instanceTable(title, all, cls) {
  if (!all || !all.length) return null;
  const list = all.filter(instanceMatches);
  if (!list.length) return h('section', {class: 'panel ' + (cls || '')}, h('h2', {}, `${title} (${all.length})`),
    h('p', {class: 'muted'}, 'None matches the filter.'));
  return h('section', {class: 'panel ' + (cls || '')}, h('h2', {}, list.length === all.length ? `${title} (${all.length})` : `${title} (${list.length} of ${all.length} match)`),
    h('table', {}, h('thead', {}, h('tr', {}, ['instance', 'labels', 'cohort', 'version', 'checksum', 'health', 'reported'].map(t => h('th', {}, t)))),
      h('tbody', {}, list.map(i => h('tr', {'data-instance': i.instance},
        // A row from a region's summary stands for i.count instances
        // alike: each one's own report is fetched from the region on the
        // per-instance page (drilldown.go).
        h('td', {}, i.instance, i.count ? [h('span', {class: 'muted'}, ` and ${i.count - 1} more alike · `),
          h('a', {href: '/instances/' + config, class: 'drill'}, 'each instance')] : ''),
        h('td', {}, labels(i.labels)), h('td', {}, i.cohort), h('td', {}, i.unknown ? '—' : 'v' + i.version),
        h('td', {}, h('code', {}, short(i.checksum))),
        // A silent region's row: its state is unknown, never healthy.
        h('td', {}, i.unknown ? h('span', {class: 'count warn', title: 'its region stopped summarising'}, 'unknown: region silent')
          : i.healthy ? 'healthy' : h('span', {class: 'count danger'}, 'unhealthy'), i.lkg ? ' · last-known-good' : '',
          i.last_error ? h('div', {class: 'err'}, i.last_error) : '',
          i.refused ? h('div', {class: 'refused'}, 'refused a pointer: ' + i.refused) : ''),
        h('td', {class: 'muted'}, i.unknown ? '' : ago(i.at)))))));
}

function renderRollout(r) {
  if (!r) return h('section', {class: 'panel'}, h('h2', {}, 'Rollout'), h('p', {class: 'muted'}, 'No rollout recorded for this config.'));
  const stages = r.stages.map(s => h('div', {class: 'stage st-' + s.status},
    h('div', {class: 'stage-head'}, h('strong', {}, s.name), ' ', h('span', {class: 'muted'},
      `${s.scope}${s.hold ? ' · hold ' + s.hold : ''} · ${s.status}`)),
    s.instances ? bar(s.coverage, `${s.on_target}/${s.instances} on v${r.version}`) : bar(0, 'no instances', '', true),
    h('div', {class: 'muted'}, s.unhealthy || s.failing ? h('span', {class: 'count danger'}, `${s.unhealthy} unhealthy · ${s.failing} failing`) : 'healthy',
      s.refused ? h('span', {class: 'count warn'}, ` · ${s.refused} refused a pointer`) : '')));
  return h('section', {class: 'panel', id: 'rollout'},
    h('h2', {}, `Rollout of v${r.version} `, state(r.state), r.emergency ? h('span', {class: 'count danger'}, ' emergency') : ''),
    h('p', {}, `from v${r.from || '—'} · stage ${r.stage} · started ${fmtTime(r.started)} · updated ${fmtTime(r.updated)}`,
      r.hold_until && r.state === 'holding' ? ` · holding until ${fmtTime(r.hold_until)}` : '',
      r.wait_until && r.state !== 'holding' ? ` · waiting until ${fmtTime(r.wait_until)}` : ''),
    r.note ? h('p', {class: 'note'}, r.note) : null,
    r.counted ? h('p', {class: 'count warn'}, r.counted) : null,
    r.reason ? h('p', {class: 'err'}, r.reason) : null,
    r.pin ? h('p', {class: 'count warn'}, `pinned to v${r.pin.version} by ${r.pin.actor}: ${r.pin.reason}${r.pending ? ` · v${r.pending} pending` : ''}`) : null,
    h('div', {class: 'stages'}, stages),
    r.log && r.log.length ? h('details', {}, h('summary', {}, 'history'),
      h('ul', {class: 'log'}, r.log.map(s => h('li', {}, h('span', {class: 'muted'}, fmtTime(s.at) + ' '), `${s.stage || ''} ${s.state} ${s.detail || ''}`)))) : null);
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
      c.unknown ? h('div', {title: 'instances of a region that stopped summarising: live as far as anyone knows, state unknown'}, 'unknown ', count(c.unknown, 'warn')) : null,
      h('div', {title: 'refused a forged or unverifiable pointer; nothing applied, not a failure'}, 'refused ', count(c.refused, 'warn'))));
  const chart = h('section', {class: 'panel'}, h('h2', {}, 'Propagation'), h('div', {id: 'chart'}));
  chart.querySelector('#chart').innerHTML = cv.chart; // server-drawn SVG, escaped there
  const versions = h('section', {class: 'panel'}, h('h2', {}, 'Versions'),
    h('table', {}, h('thead', {}, h('tr', {}, ['version', 'commit', 'author', 'message', 'committed', 'instances', 'content'].map(t => h('th', {}, t)))),
      h('tbody', {}, (cv.versions || []).filter(v => matches(filterText(), 'v' + v.version, v.commit, v.author, v.message)).map(v => [h('tr', {class: v.version === c.version ? 'current' : '', 'data-version': v.version},
        h('td', {}, 'v' + v.version, v.deleted ? ' (deleted)' : ''), h('td', {}, commit(v.commit, v.commit_url)),
        h('td', {}, v.author), h('td', {class: 'msg'}, v.message.split('\n')[0],
          (v.carries || []).map(cc => h('div', {class: 'muted', title: 'did not compile alone; its changes are in this version'},
            'carries ', cc.commit.slice(0, 12), ' by ', cc.author, ': ', cc.message))),
        h('td', {class: 'muted'}, ago(v.committed_at)),
        h('td', {}, v.instances),
        h('td', {}, h('button', {type: 'button', class: 'link', 'data-show': v.version}, openVersions.has(v.version) ? 'hide' : 'content & diff'))),
        openVersions.has(v.version) ? h('tr', {class: 'content-row'}, h('td', {colspan: 7}, renderContent(v.version))) : null]))));
  versions.addEventListener('click', e => {
    const b = e.target.closest('button[data-show]');
    if (!b) return;
    const n = Number(b.dataset.show);
    if (openVersions.has(n)) openVersions.delete(n); else { openVersions.add(n); loadContent(n); }
    rerender();
  });
  const audit = h('section', {class: 'panel'}, h('h2', {}, 'Audit'),
    cv.audit.length ? h('table', {}, h('thead', {}, h('tr', {}, ['when', 'actor', 'action', 'version', 'stage', 'reason'].map(t => h('th', {}, t)))),
      h('tbody', {}, cv.audit.map(a => h('tr', {}, h('td', {class: 'muted'}, ago(a.at)), h('td', {}, a.actor),
        h('td', {}, a.action, a.emergency ? ' (emergency)' : ''), h('td', {}, a.version ? 'v' + a.version : ''),
        h('td', {}, a.stage || ''), h('td', {}, a.reason))))) : h('p', {class: 'muted'}, 'No operator action or halt recorded.'));
  renderTailer(cv.tailer);
  // A flag set: its flags, rules and rollouts as the current version has
  // them (the version's content, fetched once per version).
  if (!c.deleted && c.version) loadContentOnce(c.version);
  editEnabled = !!cv.edit && !c.deleted;
  const flagsPanel = renderFlags(contents[c.version]);
  view.replaceChildren(...[head, flagsPanel, renderRollout(cv.rollout), chart,
    instanceTable('Stragglers', cv.stragglers, 'warn'), instanceTable('Drift', cv.drift, 'danger'),
    instanceTable('On last-known-good', cv.lkg, 'warn'), instanceTable('Unhealthy or failing', cv.unhealthy, 'danger'),
    instanceTable('Refused a pointer (forged or unverifiable: nothing applied, not an apply failure)', cv.refused, 'warn'),
    versions, audit,
    instanceTable('Instances' + (cv.more_instances ? ` (first ${cv.instances.length}; ${cv.more_instances} more)` : ''), cv.instances),
    (cv.instances || []).some(i => i.count) ? h('p', {class: 'muted', id: 'drill'}, 'Rows from a summarised region stand for many instances: ',
      h('a', {href: '/instances/' + config}, 'list each instance, asked of its region now')) : null,
  ].filter(Boolean));
  document.getElementById('actions').hidden = !cv.actions || !cv.rollout;
  document.getElementById('edit').hidden = !cv.edit || c.deleted;
}

// loadContent fetches version n's compiled content and diff once.
async function loadContent(n) {
  if (contents[n] && !contents[n].error) return;
  contents[n] = {loading: true};
  try {
    const res = await fetch(`/api/versions/${config}?version=${n}`);
    const body = await res.json();
    contents[n] = res.ok ? body : {error: body.error || res.statusText};
  } catch (e) {
    contents[n] = {error: String(e)};
  }
  rerender();
}

// loadContentOnce fetches version n's content unless it is there or on
// its way (a failed fetch is not retried on every refresh).
function loadContentOnce(n) {
  if (!contents[n]) loadContent(n);
}

// renderFlags shows a flag set version's flags: on or off, the rules in
// order and what the fallthrough serves; nothing for other configs.
function renderFlags(ct) {
  if (!ct || !ct.flags) return null;
  return h('section', {class: 'panel', id: 'flags'}, h('h2', {}, `Flags (v${ct.version})`),
    h('table', {}, h('thead', {}, h('tr', {}, ['flag', 'state', 'rules (first match wins)', 'everyone else', editEnabled ? 'change' : null].filter(Boolean).map(t => h('th', {}, t)))),
      h('tbody', {}, ct.flags.filter(f => matches(filterText(), f.key, f.fallthrough, ...(f.rules || []).map(r => r.when))).map(f => h('tr', {'data-flag': f.key},
        h('td', {}, h('code', {}, f.key), h('div', {class: 'muted'}, f.type)),
        h('td', {}, f.on ? 'on' : h('span', {class: 'count warn'}, `off: serves ${f.off_variant}`),
          (f.prerequisites || []).length ? h('div', {class: 'muted'}, 'needs ' + f.prerequisites.join(', ')) : ''),
        h('td', {}, (f.rules || []).length ? h('ol', {}, f.rules.map(r => h('li', {}, r.id ? h('strong', {}, r.id + ': ') : '', `${r.when} ▶ ${r.serves}`))) : h('span', {class: 'muted'}, 'none')),
        h('td', {class: 'rollout'}, f.fallthrough || `${f.default_variant} (default)`),
        editEnabled ? h('td', {}, h('button', {type: 'button', class: 'link', 'data-edit-flag': f.key}, 'change')) : null)))));
}

// renderContent shows a version's diff against the one before it and its
// compiled JSON.
function renderContent(n) {
  const ct = contents[n];
  if (!ct || ct.loading) return h('p', {class: 'muted'}, `loading v${n}…`);
  if (ct.error) return h('p', {class: 'err'}, ct.error);
  const diff = ct.previous
    ? (ct.diff.length
      ? h('table', {class: 'diff'}, h('thead', {}, h('tr', {}, ['path', 'change', `v${ct.previous}`, `v${ct.version}`].map(t => h('th', {}, t)))),
        h('tbody', {}, ct.diff.map(d => h('tr', {class: 'op-' + d.op},
          h('td', {}, h('code', {}, d.path || '(document)')),
          h('td', {}, d.op, d.breaking ? h('span', {class: 'count danger'}, ' breaking') : '', d.new_field ? h('span', {class: 'count warn'}, ' new field') : ''),
          h('td', {}, d.old ? h('code', {class: 'old'}, JSON.stringify(d.old)) : ''),
          h('td', {}, d.new ? h('code', {class: 'new'}, JSON.stringify(d.new)) : '')))))
      : h('p', {class: 'muted'}, `Same content as v${ct.previous}.`))
    : h('p', {class: 'muted'}, 'The first retained version: nothing to compare with.');
  return h('div', {class: 'content', id: 'content-v' + n},
    h('h3', {}, `v${ct.version}` + (ct.previous ? ` compared with v${ct.previous}` : ''), ' ', h('code', {class: 'muted'}, 'sha256:' + ct.checksum.slice(0, 12))),
    diff,
    h('details', {}, h('summary', {}, `compiled content of v${ct.version}`), h('pre', {class: 'json'}, ct.deleted ? '(deleted)' : ct.content)));
}

function rerender() {
  if (!last) return;
  if (last.kind === 'overview') renderOverview(last.data); else renderConfig(last.data);
}

function setupFilters() {
  const search = document.getElementById('search');
  search.placeholder = config ? 'Filter instances and versions (name, label, version, error)' : 'Filter configs (path, commit, author, state)';
  search.value = new URLSearchParams(location.search).get('q') || '';
  search.addEventListener('input', rerender);
  document.getElementById('problems').addEventListener('change', rerender);
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
      if (action === 'rollback') {
        // A rollback moves every instance and pins the config: ask first.
        const to = Number(document.getElementById('to').value) || 0;
        const what = `Roll ${config} back to ${to ? 'v' + to : 'the previous version'} on every instance and pin it there?\n\nReason: ${document.getElementById('reason').value || '(none given)'}`;
        if (!window.confirm(what)) {
          result.textContent = 'rollback: cancelled';
          return;
        }
      }
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

// The edit control (index.html #edit): a value by its CUE path, or a
// flag's switch and rollout. Preview is a dry run of the set API: where the
// value is written and the compiled diff; Submit sends the request the
// preview showed, expecting the values it read, and links the commit or
// pull request.
let editEnabled = false;
let editFlag = '';
let previewed = null; // {key, expect}: the last preview that passed

function editRequest() {
  const v = id => document.getElementById(id).value.trim();
  const common = {reason: v('edit-reason'), actor: v('edit-actor'), mode: v('edit-mode')};
  if (editFlag) {
    const b = {...common, config, flag: editFlag};
    const sw = v('edit-switch');
    if (sw === 'on') b.enable = true;
    else if (sw === 'off') b.disable = true;
    else if (v('edit-rollout') !== '') b.rollout = Number(v('edit-rollout'));
    return ['/api/flags/set', b];
  }
  return ['/api/set', {...common, configs: [config], set: [{path: v('edit-path'), value: v('edit-value')}]}];
}

function showEditFlag(key) {
  editFlag = key;
  for (const [id, flag] of [['edit-path-label', false], ['edit-value-label', false], ['edit-flag-label', true],
    ['edit-rollout-label', true], ['edit-switch-label', true], ['edit-value-mode', true]]) {
    document.getElementById(id).hidden = flag !== !!key;
  }
  document.getElementById('edit-flag').value = key;
  editChanged();
  document.getElementById('edit').scrollIntoView();
}

function editChanged() {
  previewed = null;
  document.getElementById('edit-submit').disabled = true;
  document.getElementById('edit-preview').replaceChildren();
}

// editFailure words a refused set: the current value of a conflict, the
// origin of a refusal, the compiler's errors, the policy.
function editFailure(status, body) {
  const at = p => `${p.file}:${p.line}:${p.column}`;
  if (body.conflict) return h('p', {class: 'err'}, `${body.conflict.path} changed since: it is ${JSON.stringify(body.conflict.current)} now`);
  if (body.refused) return h('p', {class: 'err'}, `cannot set ${body.refused.path}: its origin is ${body.refused.kind} at ${(body.refused.positions || []).map(at).join(', ')}; ${body.refused.hint}`);
  if (body.invalid) return h('div', {class: 'err'}, h('p', {}, 'the change would break a config:'), h('ul', {}, (body.invalid.errors || []).map(e => h('li', {}, `${e.file}:${e.line}:${e.column}: ${e.message}`))));
  return h('p', {class: 'err'}, `${status}: ${body.error}`);
}

function renderEditPreview(res) {
  const at = p => `${p.file}:${p.line}`;
  return h('div', {class: 'content', id: 'edit-diff'},
    h('table', {}, h('thead', {}, h('tr', {}, ['value', 'now', 'after', 'origin', 'edited at'].map(t => h('th', {}, t)))),
      h('tbody', {}, (res.values || []).map(v => h('tr', {'data-path': v.path},
        h('td', {}, h('code', {}, v.path)), h('td', {}, h('code', {class: 'old'}, JSON.stringify(v.old))),
        h('td', {}, h('code', {class: 'new'}, JSON.stringify(v.new))), h('td', {}, v.origin),
        h('td', {class: 'edit-origin'}, h('code', {}, at(v.edited))))))),
    (res.report?.configs || []).map(c => [h('h3', {}, `compiled diff of ${c.config} (${c.status})`),
      h('table', {class: 'diff'}, h('tbody', {}, (c.diff || []).map(d => h('tr', {class: 'op-' + d.op},
        h('td', {}, h('code', {}, d.path)), h('td', {}, d.op),
        h('td', {}, d.old ? h('code', {class: 'old'}, JSON.stringify(d.old)) : ''),
        h('td', {}, d.new ? h('code', {class: 'new'}, JSON.stringify(d.new)) : '')))))]),
    h('p', {class: 'muted'}, `risk ${res.report?.risk?.level || '?'}; checked on ${short(res.base)}`));
}

async function sendEdit(dry) {
  const token = document.getElementById('edit-token');
  const out = document.getElementById('edit-preview');
  const result = document.getElementById('edit-result');
  const [path, body] = editRequest();
  const key = JSON.stringify([path, body]);
  body.dry_run = dry;
  if (!dry) {
    if (!previewed || previewed.key !== key) { editChanged(); result.textContent = 'preview the change first'; return; }
    body.expect = previewed.expect;
  }
  result.textContent = dry ? 'checking…' : 'submitting…';
  try {
    const res = await fetch(path, {method: 'POST',
      headers: {'Authorization': 'Bearer ' + token.value, 'Content-Type': 'application/json'}, body: JSON.stringify(body)});
    const answer = await res.json();
    if (!res.ok) {
      editChanged();
      result.textContent = '';
      out.replaceChildren(editFailure(res.status, answer));
      return;
    }
    if (answer.unchanged) {
      editChanged();
      out.replaceChildren(renderEditPreview(answer));
      result.textContent = 'unchanged: every value already is the one asked for; nothing to commit';
      return;
    }
    if (dry) {
      previewed = {key, expect: (answer.values || []).map(v => ({config: v.config, path: v.path, value: JSON.stringify(v.old)}))};
      out.replaceChildren(renderEditPreview(answer));
      document.getElementById('edit-submit').disabled = false;
      result.textContent = 'preview: nothing written yet';
      return;
    }
    editChanged();
    const row = last?.data?.row || {};
    const url = answer.pull_request ? answer.pull_request.url
      : (row.commit_url && row.commit ? row.commit_url.replace(row.commit, answer.commit) : '');
    const what = answer.pull_request ? `pull request #${answer.pull_request.number}` : `commit ${short(answer.commit)} on ${answer.branch}`;
    result.replaceChildren('done: ', url ? h('a', {href: url, id: 'edit-link'}, what) : h('code', {id: 'edit-link'}, what));
  } catch (e) {
    result.textContent = String(e);
  }
}

function setupEdit() {
  const token = document.getElementById('edit-token');
  token.value = sessionStorage.getItem('cuecast-token') || '';
  token.addEventListener('change', () => sessionStorage.setItem('cuecast-token', token.value));
  document.getElementById('edit-form').addEventListener('submit', e => e.preventDefault());
  document.getElementById('edit-form').addEventListener('input', e => { if (e.target.id !== 'edit-token') editChanged(); });
  document.getElementById('edit-preview-button').addEventListener('click', () => sendEdit(true));
  document.getElementById('edit-submit').addEventListener('click', () => sendEdit(false));
  document.getElementById('edit-value-mode').addEventListener('click', () => showEditFlag(''));
  view.addEventListener('click', e => {
    const b = e.target.closest('button[data-edit-flag]');
    if (b) showEditFlag(b.dataset.editFlag);
  });
}

function connect() {
  const conn = document.getElementById('conn');
  const es = new EventSource('/api/events' + (config ? '?config=' + encodeURIComponent(config) : ''));
  es.onopen = () => { conn.textContent = 'live'; conn.className = 'conn live'; };
  es.onerror = () => { conn.textContent = 'reconnecting…'; conn.className = 'conn down'; };
  es.addEventListener('overview', e => { last = {kind: 'overview', data: JSON.parse(e.data)}; renderOverview(last.data); });
  es.addEventListener('config', e => { last = {kind: 'config', data: JSON.parse(e.data)}; renderConfig(last.data); });
  es.addEventListener('problem', e => view.replaceChildren(h('p', {class: 'err'}, JSON.parse(e.data).error)));
}

setupFilters();
if (config) { setupActions(); setupEdit(); }
connect();
