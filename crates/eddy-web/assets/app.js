// eddy's dashboard: reads the REST API of the server that served it, once a second, and
// draws the cluster, its jobs (graph, vertices, subtasks, watermarks, back pressure),
// checkpoints, exceptions and TaskManagers. No framework, no build step, nothing fetched
// from elsewhere.
'use strict';

const state = { route: [], tab: 'overview', vertex: null, failures: 0 };
const $ = (id) => document.getElementById(id);

// ---- credentials: a `#token=` link, else the login form; kept for this tab only.
// `#/jobs/1?token=…` opens the job's page signed in, and the token leaves the address bar.
(function takeTokenFromLink() {
  const m = location.hash.match(/[?&#]token=([^&]+)/);
  if (m) {
    sessionStorage.setItem('eddy-token', decodeURIComponent(m[1]));
    const rest = location.hash.replace(/[?&]?token=[^&]+/, '').replace(/^#$/, '');
    history.replaceState(null, '', location.pathname + (rest || '#/'));
  }
})();

class Unauthorized extends Error {}

async function api(path, options = {}) {
  const headers = Object.assign({ 'Accept': 'application/json' }, options.headers || {});
  const token = sessionStorage.getItem('eddy-token');
  if (token) headers['Authorization'] = 'Bearer ' + token;
  const response = await fetch(path, Object.assign({}, options, { headers }));
  if (response.status === 401) throw new Unauthorized();
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error((body.errors || [response.statusText]).join('; '));
  return body;
}

$('login-form').addEventListener('submit', (e) => {
  e.preventDefault();
  sessionStorage.setItem('eddy-token', $('token').value.trim());
  $('login').classList.add('hidden');
  refresh();
});

// ---- formatting
const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
function num(n) {
  if (n === null || n === undefined) return '–';
  const a = Math.abs(n);
  if (a >= 1e9) return (n / 1e9).toFixed(2) + ' G';
  if (a >= 1e6) return (n / 1e6).toFixed(2) + ' M';
  if (a >= 1e4) return (n / 1e3).toFixed(1) + ' k';
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}
function bytes(n) {
  if (!n) return '0 B';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + ' ' + units[i];
}
function duration(ms) {
  if (ms === null || ms === undefined) return '–';
  if (ms < 1000) return ms + ' ms';
  const s = Math.floor(ms / 1000);
  if (s < 60) return (ms / 1000).toFixed(1) + ' s';
  const m = Math.floor(s / 60), h = Math.floor(m / 60), d = Math.floor(h / 24);
  if (d) return d + 'd ' + (h % 24) + 'h';
  if (h) return h + 'h ' + (m % 60) + 'm';
  return m + 'm ' + (s % 60) + 's';
}
const time = (ms) => ms ? new Date(ms).toLocaleTimeString() : '–';
// For ids inside inline handlers: only the characters job and vertex ids are made of, so
// that nothing in them can leave the string.
const safeId = (s) => String(s).replace(/[^A-Za-z0-9_.-]/g, '');
const badge = (s) => `<span class="badge s-${esc(s)}">${esc(s)}</span>`;
const level = (l) => `<span class="badge b-${esc(l)}">${esc(String(l).toUpperCase())}</span>`;
function watermark(w) {
  if (w === null || w === undefined) return '–';
  const n = Number(w);
  // Event time that looks like epoch milliseconds is shown as a time of day.
  return n > 946684800000 ? new Date(n).toLocaleTimeString() + ` <span class="muted">(${n})</span>` : esc(n);
}
function timeBar(busy, bp, idle) {
  const p = (v) => Math.max(0, Math.min(100, v / 10)).toFixed(1);
  return `<div class="bar" title="busy ${p(busy)}%, backpressured ${p(bp)}%, idle ${p(idle)}%">` +
    `<span class="busy" style="width:${p(busy)}%"></span><span class="bp" style="width:${p(bp)}%"></span>` +
    `<span class="idle" style="width:${p(idle)}%"></span></div>`;
}
// A vertex's busiest and most backpressured subtasks (Flink's maxima); idle is what they
// leave of a second.
function vertexBar(m) {
  const busy = m['busy-ms-per-second'], bp = m['backpressured-ms-per-second'];
  return timeBar(busy, bp, Math.max(0, 1000 - busy - bp));
}
function toast(text) {
  const t = $('toast');
  t.textContent = text;
  t.classList.remove('hidden');
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => t.classList.add('hidden'), 6000);
}

// ---- routing: #/, #/jobs, #/jobs/ID, #/taskmanagers
function route() {
  const parts = location.hash.replace(/^#\/?/, '').replace(/\?.*$/, '').split('/').filter(Boolean);
  state.route = parts;
  // A job's page: #/jobs/ID/TAB/VERTEX, so that every view has an address.
  state.tab = parts[0] === 'jobs' && parts[2] ? parts[2] : 'overview';
  state.vertex = parts[0] === 'jobs' && parts[3] ? decodeURIComponent(parts[3]) : null;
  document.querySelectorAll('[data-nav]').forEach((a) => {
    const nav = a.dataset.nav;
    a.classList.toggle('active', (parts[0] || 'overview') === nav || (nav === 'jobs' && parts[0] === 'jobs'));
  });
}
window.addEventListener('hashchange', () => { route(); refresh(); });

// ---- pages
async function header() {
  const o = await api('/overview');
  $('role').textContent = o.role === 'local' ? 'local job' : o.role;
  const pills = o.role === 'jobmanager'
    ? [['TaskManagers', o.taskmanagers], ['slots free', `${o['slots-available']} / ${o['slots-total']}`], ['running jobs', o['jobs-running']]]
    : [['running jobs', o['jobs-running']]];
  $('pills').innerHTML = pills.map(([k, v]) => `<span class="pill">${k} <b>${esc(v)}</b></span>`).join('');
  return o;
}

function jobsTable(jobs) {
  if (!jobs.length) return '<p class="muted">No jobs yet.</p>';
  return `<table><thead><tr><th>Name</th><th>State</th><th class="num">Parallelism</th><th class="num">Source records / s</th>
    <th class="num">Checkpoints</th><th class="num">Restarts</th><th>Started</th><th class="num">Duration</th><th>Id</th></tr></thead><tbody>` +
    jobs.map((j) => `<tr class="click" onclick="location.hash='#/jobs/${safeId(j.jid)}'">
      <td><a href="#/jobs/${encodeURIComponent(j.jid)}">${esc(j.name)}</a></td><td>${badge(j.state)}</td>
      <td class="num">${j.parallelism}</td><td class="num">${num(j['source-records-per-second'])}</td>
      <td class="num">${j['checkpoints-completed']}</td><td class="num">${j.restarts}</td>
      <td>${time(j['start-time'])}</td><td class="num">${duration(j.duration)}</td><td class="mono">${esc(j.jid)}</td></tr>`).join('') +
    '</tbody></table>';
}

async function overviewPage(o) {
  const jobs = (await api('/jobs/overview')).jobs;
  const cards = o.role === 'jobmanager'
    ? [['TaskManagers', o.taskmanagers], ['Slots total', o['slots-total']], ['Slots free', o['slots-available']],
       ['Running', o['jobs-running']], ['Finished', o['jobs-finished']], ['Cancelled', o['jobs-cancelled']], ['Failed', o['jobs-failed']]]
    : [['Running', o['jobs-running']], ['Jobs', jobs.length]];
  return `<h1>Overview</h1><p class="muted">eddy ${esc(o['eddy-version'])}</p>
    <div class="cards">${cards.map(([k, v]) => `<div class="stat"><div class="v">${esc(v)}</div><div class="k">${k}</div></div>`).join('')}</div>
    <div class="card"><h2>Jobs</h2>${jobsTable(jobs)}</div>`;
}

async function jobsPage() {
  const jobs = (await api('/jobs/overview')).jobs;
  return `<h1>Jobs</h1><div class="card">${jobsTable(jobs)}</div>`;
}

async function taskManagersPage() {
  const tms = (await api('/taskmanagers')).taskmanagers;
  const rows = tms.map((t) => {
    const used = t.slotsNumber - t.freeSlots;
    return `<tr><td>${esc(t.id)}</td><td>${esc(t.host)}</td><td class="num">${t.pid}</td>
      <td class="num">${t.slotsNumber}</td><td class="num">${t.freeSlots}</td>
      <td><div class="bar" style="max-width:160px"><span class="busy" style="width:${t.slotsNumber ? 100 * used / t.slotsNumber : 0}%"></span></div></td>
      <td class="num">${t.subtasks}</td>
      <td>${t.jobs.map((j) => `<a href="#/jobs/${encodeURIComponent(j.jid)}">${esc(j.name)}</a> <span class="muted">(${j.subtasks})</span>`).join(', ') || '<span class="muted">–</span>'}</td>
      <td>${time(t.registered)}</td><td class="mono">${esc(t['metrics-address'] || '–')}</td></tr>`;
  }).join('');
  return `<h1>Task Managers</h1><div class="card">` + (tms.length
    ? `<table><thead><tr><th>Id</th><th>Host</th><th class="num">PID</th><th class="num">Slots</th><th class="num">Free</th><th>Used</th><th class="num">Subtasks</th><th>Jobs</th><th>Registered</th><th>/metrics</th></tr></thead><tbody>${rows}</tbody></table>`
    : '<p class="muted">No TaskManagers: a local job runs its subtasks in its own process.</p>') + '</div>';
}

// The job graph: vertices in layers by their longest path from a source, ordered in each
// layer by their inputs' positions; edges as curves labelled with their ship strategy.
function layout(job) {
  const ids = job.vertices.map((v) => v.id);
  const inputs = {};
  job.plan.nodes.forEach((n) => { inputs[n.id] = n.inputs; });
  const layer = {};
  const depth = (id, seen = new Set()) => {
    if (layer[id] !== undefined) return layer[id];
    if (seen.has(id)) return 0;
    seen.add(id);
    const ins = inputs[id] || [];
    layer[id] = ins.length ? 1 + Math.max(...ins.map((i) => depth(i.id, seen))) : 0;
    return layer[id];
  };
  ids.forEach((id) => depth(id));
  const layers = [];
  ids.forEach((id) => { (layers[layer[id]] = layers[layer[id]] || []).push(id); });
  const pos = {};
  const W = 250, H = 108, GX = 90, GY = 34;
  layers.forEach((column, x) => {
    if (x > 0) {
      const center = (id) => { const ins = inputs[id] || []; return ins.length ? ins.reduce((s, i) => s + pos[i.id].y, 0) / ins.length : 0; };
      column.sort((a, b) => center(a) - center(b));
    }
    column.forEach((id, y) => { pos[id] = { x: 20 + x * (W + GX), y: 20 + y * (H + GY), w: W, h: H }; });
  });
  const width = 40 + layers.length * (W + GX) - GX;
  const height = 40 + Math.max(...layers.map((c) => c.length)) * (H + GY) - GY;
  return { pos, width, height, inputs };
}

function graph(job) {
  const { pos, width, height, inputs } = layout(job);
  let svg = `<svg width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="job graph">`;
  svg += '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#9aa6b8"/></marker></defs>';
  job.vertices.forEach((v) => (inputs[v.id] || []).forEach((i) => {
    const a = pos[i.id], b = pos[v.id];
    if (!a || !b) return;
    const x1 = a.x + a.w, y1 = a.y + a.h / 2, x2 = b.x - 2, y2 = b.y + b.h / 2, mx = (x1 + x2) / 2;
    svg += `<path class="edge" marker-end="url(#arrow)" d="M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}"/>`;
    svg += `<text class="edge-label" x="${mx}" y="${(y1 + y2) / 2 - 6}" text-anchor="middle">${esc(i.ship_strategy)}</text>`;
  }));
  job.vertices.forEach((v) => {
    const p = pos[v.id], m = v.metrics;
    const selected = state.vertex === v.id ? ' selected' : '';
    const name = v.name.length > 34 ? v.name.slice(0, 33) + '…' : v.name;
    const busy = Math.round(m['busy-ms-per-second'] / 10), bp = Math.round(m['backpressured-ms-per-second'] / 10);
    svg += `<g class="node ${esc(v['backpressure-level'])}${selected}" data-vertex="${esc(v.id)}" onclick="selectVertex('${safeId(v.id)}')">
      <title>${esc(v.name)}</title>
      <rect class="box" x="${p.x}" y="${p.y}" rx="8" width="${p.w}" height="${p.h}"/>
      <text x="${p.x + 12}" y="${p.y + 21}">${esc(name)}</text>
      <text class="small" x="${p.x + 12}" y="${p.y + 39}">Parallelism ${v.parallelism} · ${esc(v.status)}</text>
      <text class="rate" x="${p.x + 12}" y="${p.y + 60}">in ${num(m['records-in-per-second'])}/s · out ${num(m['records-out-per-second'])}/s</text>
      <text class="small" x="${p.x + 12}" y="${p.y + 78}">busy ${busy}% · backpressured ${bp}% · ${esc(String(v['backpressure-level']).toUpperCase())}</text>
      <rect x="${p.x + 12}" y="${p.y + 88}" width="${p.w - 24}" height="6" rx="3" fill="#eef1f5"/>
      <rect x="${p.x + 12}" y="${p.y + 88}" width="${(p.w - 24) * Math.min(busy, 100) / 100}" height="6" rx="3" fill="#2f6fdf"/>
      <rect x="${p.x + 12 + (p.w - 24) * Math.min(busy, 100) / 100}" y="${p.y + 88}" width="${(p.w - 24) * Math.min(bp, 100) / 100}" height="6" fill="#d64545"/>
    </g>`;
  });
  return svg + '</svg>';
}

const jobPath = () => '#/jobs/' + state.route[1];
window.selectVertex = (id) => { location.hash = jobPath() + '/overview' + (state.vertex === id ? '' : '/' + encodeURIComponent(id)); };

function vertexTable(job) {
  return `<table><thead><tr><th>Vertex</th><th class="num">Parallelism</th><th class="num">Records in</th><th class="num">Records out</th>
    <th class="num">In / s</th><th class="num">Out / s</th><th>Busy · backpressured · idle</th><th>Back pressure</th><th>Low watermark</th><th class="num">State</th></tr></thead><tbody>` +
    job.vertices.map((v) => {
      const m = v.metrics;
      return `<tr class="click${state.vertex === v.id ? ' selected' : ''}" onclick="selectVertex('${safeId(v.id)}')">
        <td>${esc(v.name)}</td><td class="num">${v.parallelism}</td><td class="num">${num(m['read-records'])}</td><td class="num">${num(m['write-records'])}</td>
        <td class="num">${num(m['records-in-per-second'])}</td><td class="num">${num(m['records-out-per-second'])}</td>
        <td>${vertexBar(m)}</td>
        <td>${level(v['backpressure-level'])}</td><td>${watermark(v['low-watermark'])}</td><td class="num">${bytes(v['state-bytes'])}</td></tr>`;
    }).join('') + '</tbody></table>' +
    '<div class="legend"><span><i style="background:#2f6fdf"></i>busy</span><span><i style="background:#d64545"></i>backpressured</span><span><i style="background:#d5dce7"></i>idle</span></div>';
}

async function vertexPanel(jid, vid) {
  const v = await api(`/jobs/${jid}/vertices/${vid}`);
  const rows = v.subtasks.map((s) => `<tr><td>${s.subtask}</td><td>${s['taskmanager-id'] || 'local'}</td>
    <td class="num">${num(s.metrics['read-records'])}</td><td class="num">${num(s.metrics['write-records'])}</td>
    <td class="num">${num(s['records-in-per-second'])}</td><td class="num">${num(s['records-out-per-second'])}</td>
    <td>${timeBar(s['busy-ms-per-second'], s['backpressured-ms-per-second'], s['idle-ms-per-second'])}</td>
    <td>${level(s['backpressure-level'])}</td><td class="num">${num(s['checkpoint-alignment-ms'])} ms</td>
    <td>${watermark(s['input-watermark'])}</td><td>${watermark(s['output-watermark'])}</td></tr>`).join('');
  return `<div class="card"><h2>${esc(v.name)} — subtasks</h2>
    <p class="muted">Operators: ${v.operators.map(esc).join(' → ')}</p>
    <table><thead><tr><th>Subtask</th><th>TaskManager</th><th class="num">Records in</th><th class="num">Records out</th><th class="num">In / s</th><th class="num">Out / s</th>
    <th>Busy · backpressured · idle</th><th>Back pressure</th><th class="num">Last alignment</th><th>Input watermark</th><th>Output watermark</th></tr></thead><tbody>${rows}</tbody></table></div>`;
}

// Checkpoint history: a bar per checkpoint (its duration; failed ones red) and a line of
// its size, newest on the right.
function checkpointChart(history) {
  const items = history.slice(0, 40).reverse();
  if (!items.length) return '<p class="muted">No checkpoint yet.</p>';
  const W = 760, H = 190, L = 50, R = 60, T = 12, B = 26, bw = (W - L - R) / items.length;
  const maxD = Math.max(1, ...items.map((c) => c.end_to_end_duration));
  const maxS = Math.max(1, ...items.map((c) => c.state_size));
  let svg = `<svg class="chart" width="100%" viewBox="0 0 ${W} ${H}" preserveAspectRatio="xMinYMin meet">`;
  svg += `<line class="axis" x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}"/>`;
  svg += `<text x="${L - 6}" y="${T + 8}" text-anchor="end">${duration(maxD)}</text><text x="${L - 6}" y="${H - B}" text-anchor="end">0</text>`;
  svg += `<text x="${W - R + 6}" y="${T + 8}">${bytes(maxS)}</text>`;
  let line = '';
  items.forEach((c, i) => {
    const h = (H - T - B) * c.end_to_end_duration / maxD, x = L + i * bw + bw * 0.15;
    const cls = { FAILED: 'failed', IN_PROGRESS: 'pending' }[c.status] || 'dur';
    svg += `<rect class="${cls}" x="${x}" y="${H - B - h}" width="${bw * 0.7}" height="${Math.max(h, 1)}"><title>#${c.id} ${c.status}: ${duration(c.end_to_end_duration)}, ${bytes(c.state_size)}</title></rect>`;
    if (c.status === 'COMPLETED') {
      const y = H - B - (H - T - B) * c.state_size / maxS;
      line += (line ? ' L' : 'M') + (L + i * bw + bw / 2) + ',' + y;
    }
    if (items.length <= 20 || i % Math.ceil(items.length / 20) === 0) svg += `<text x="${L + i * bw + bw / 2}" y="${H - 8}" text-anchor="middle">${c.id}</text>`;
  });
  if (line) svg += `<path class="size" d="${line}"/>`;
  svg += '</svg>';
  return svg + '<div class="legend"><span><i style="background:#2f6fdf"></i>duration</span><span><i style="background:#d64545"></i>failed</span><span><i style="background:#e08a20"></i>full size</span></div>';
}

async function checkpointsTab(jid) {
  const [c, config] = await Promise.all([api(`/jobs/${jid}/checkpoints`), api(`/jobs/${jid}/checkpoints/config`)]);
  const counts = c.counts, sum = c.summary;
  const cards = [['Triggered', counts.total], ['In progress', counts.in_progress], ['Completed', counts.completed], ['Failed', counts.failed],
    ['Avg duration', duration(sum.end_to_end_duration.avg)], ['Max duration', duration(sum.end_to_end_duration.max)], ['Avg size', bytes(sum.state_size.avg)]];
  const rows = c.history.map((h) => `<tr><td>${h.id}${h.is_savepoint ? ' <span class="badge s-FINISHED">savepoint</span>' : ''}</td><td>${badge(h.status)}</td>
    <td>${time(h.trigger_timestamp)}</td><td class="num">${duration(h.end_to_end_duration)}</td><td class="num">${duration(h.sync_duration)}</td>
    <td class="num">${duration(h.async_duration)}</td><td class="num">${bytes(h.state_size)}</td><td class="num">${bytes(h.checkpointed_size)}</td>
    <td class="mono">${esc(h.failure_message || h.external_path)}</td></tr>`).join('');
  return `<div class="cards">${cards.map(([k, v]) => `<div class="stat"><div class="v">${esc(v)}</div><div class="k">${k}</div></div>`).join('')}</div>
    <div class="card"><h2>Duration and size per checkpoint</h2>${checkpointChart(c.history)}</div>
    <div class="card"><h2>History</h2><table><thead><tr><th>Id</th><th>Status</th><th>Triggered</th><th class="num">Duration</th><th class="num">Sync</th><th class="num">Async</th>
      <th class="num">Full size</th><th class="num">Written</th><th>Path or failure</th></tr></thead><tbody>${rows}</tbody></table></div>
    <div class="card"><h2>Configuration</h2><table><tbody>
      <tr><td>Mode</td><td>${esc(config.mode)}</td></tr><tr><td>Interval</td><td>${config.interval ? duration(config.interval) : 'off'}</td></tr>
      <tr><td>Timeout</td><td>${duration(config.timeout)}</td></tr><tr><td>Min pause</td><td>${duration(config.min_pause)}</td></tr>
      <tr><td>Max concurrent</td><td>${config.max_concurrent}</td></tr><tr><td>Retained</td><td>${config.retained}</td></tr>
      <tr><td>Storage</td><td class="mono">${esc(config.checkpoint_storage)}</td></tr>
      <tr><td>Restored from</td><td class="mono">${esc(c.latest.restored ? c.latest.restored.external_path : '–')}</td></tr></tbody></table></div>`;
}

async function exceptionsTab(jid) {
  const e = await api(`/jobs/${jid}/exceptions`);
  const entries = e.exceptionHistory.entries;
  if (!entries.length) return `<div class="card"><p class="muted">No failure since the job started (${e.restarts} restarts).</p></div>`;
  return `<div class="card"><h2>Failures (${e.restarts} restarts)</h2><table><thead><tr><th>Time</th><th>Attempt</th><th>Then</th><th>Exception</th></tr></thead><tbody>` +
    entries.map((x) => `<tr><td>${time(x.timestamp)}</td><td>${x.attempt}</td><td>${x.restarted ? badge('RESTARTED') : badge('FAILED')}</td>
      <td class="mono">${esc(x.stacktrace)}</td></tr>`).join('') + '</tbody></table></div>';
}

async function jobPage(jid) {
  const job = await api(`/jobs/${jid}`);
  const running = job.state === 'RUNNING';
  const tabs = [['overview', 'Overview'], ['checkpoints', 'Checkpoints'], ['exceptions', 'Exceptions']];
  let html = `<div class="jobhead"><div><h1>${esc(job.name)} ${badge(job.state)}</h1>
      <div class="meta">id ${esc(job.jid)} · started ${time(job['start-time'])} · running ${duration(job.duration)} · attempt ${job.attempt} · ${job.restarts} restarts · max parallelism ${job['max-parallelism']}</div></div>
      <div class="actions"><button ${running ? '' : 'disabled'} onclick="savepoint('${safeId(jid)}', false)">Savepoint</button>
      <button ${running ? '' : 'disabled'} onclick="savepoint('${safeId(jid)}', true)">Stop with savepoint</button>
      <button class="danger" ${running ? '' : 'disabled'} onclick="cancelJob('${safeId(jid)}')">Cancel</button></div></div>
    <div class="tabs">${tabs.map(([k, v]) => `<a href="#/jobs/${esc(jid)}/${k}" class="${state.tab === k ? 'active' : ''}">${v}</a>`).join('')}</div>`;
  if (state.tab === 'checkpoints') return html + await checkpointsTab(jid);
  if (state.tab === 'exceptions') return html + await exceptionsTab(jid);
  html += `<div class="card"><h2>Job graph</h2><div class="graph">${graph(job)}</div></div>`;
  if (state.vertex !== null && job.vertices.some((v) => v.id === state.vertex)) html += await vertexPanel(jid, state.vertex);
  html += `<div class="card"><h2>Vertices</h2>${vertexTable(job)}</div>`;
  if (job.coordinators.length) html += `<div class="card"><h2>Sources</h2>${job.coordinators.map((l) => `<div class="mono">${esc(l)}</div>`).join('')}</div>`;
  return html;
}

// ---- operations: asynchronous, polled by their trigger id.
window.savepoint = async (jid, stop) => {
  const dir = prompt(stop ? 'Stop the job after a savepoint into directory (absolute path):' : 'Savepoint directory (absolute path):');
  if (!dir) return;
  try {
    const path = stop ? `/jobs/${jid}/stop` : `/jobs/${jid}/savepoints`;
    const body = stop ? { targetDirectory: dir } : { 'target-directory': dir };
    const { 'request-id': trigger } = await api(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    toast(`${stop ? 'Stop' : 'Savepoint'} triggered (${trigger})…`);
    for (;;) {
      await new Promise((r) => setTimeout(r, 500));
      const s = await api(`/jobs/${jid}/savepoints/${trigger}`);
      if (s.status.id !== 'COMPLETED') continue;
      const op = s.operation;
      toast(op.location ? `Savepoint written: ${op.location}` : `Savepoint failed: ${op['failure-cause']['stack-trace']}`);
      break;
    }
  } catch (e) { toast(String(e.message || e)); }
};
window.cancelJob = async (jid) => {
  if (!confirm('Cancel this job?')) return;
  try { await api(`/jobs/${jid}?mode=cancel`, { method: 'PATCH' }); toast('Cancelling…'); } catch (e) { toast(String(e.message || e)); }
};

// ---- the loop
let busy = false;
async function refresh() {
  if (busy) return;
  busy = true;
  try {
    const o = await header();
    const [page, id] = state.route;
    let html;
    if (page === 'jobs' && id) html = await jobPage(encodeURIComponent(decodeURIComponent(id)));
    else if (page === 'jobs') html = await jobsPage();
    else if (page === 'taskmanagers') html = await taskManagersPage();
    else html = await overviewPage(o);
    $('main').innerHTML = html;
    $('live').classList.remove('stale');
    $('live').title = 'refreshed ' + new Date().toLocaleTimeString();
  } catch (e) {
    if (e instanceof Unauthorized) {
      $('login').classList.remove('hidden');
      $('login-error').textContent = sessionStorage.getItem('eddy-token') ? 'That secret was refused.' : '';
    } else {
      $('live').classList.add('stale');
      $('live').title = String(e.message || e);
      if (!$('main').innerHTML.trim() || $('main').textContent === 'Loading…') $('main').innerHTML = `<p class="error">${esc(e.message || e)}</p>`;
    }
  } finally {
    busy = false;
  }
}

route();
refresh();
setInterval(() => { if ($('login').classList.contains('hidden')) refresh(); }, 1000);
