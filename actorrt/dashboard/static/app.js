// The actorrt dashboard page: hash routes, one view at a time, refreshed on each
// server-sent summary (/api/events). Read-only: it only GETs the JSON API.
"use strict";

const main = document.getElementById("main");
const state = { sort: { key: "name", dir: 1 }, filter: "", logs: {}, plots: {} };

function esc(v) {
  return String(v ?? "").replace(/[&<>"']/g, c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
function fmt(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toPrecision(5);
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}
function amount(k, v) { return k === "memory" && typeof v === "number" ? (v / 2 ** 30).toFixed(1) + " GiB" : fmt(v); }
function res(d) { const e = Object.entries(d || {}); return e.length ? e.map(([k, v]) => `${esc(k)}: ${esc(amount(k, v))}`).join(", ") : "none"; }
async function api(path) {
  const r = await fetch(path, { credentials: "same-origin", cache: "no-store" });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}
function route() {
  const parts = (location.hash.replace(/^#\/?/, "") || "sweeps").split("/").map(decodeURIComponent);
  return { page: parts[0], args: parts.slice(1) };
}
function table(cols, rows, attrs) {
  const head = cols.map(c => `<th data-key="${esc(c[0])}">${esc(c[1])}</th>`).join("");
  const body = rows.map((r, i) => `<tr ${attrs ? attrs(r, i) : ""}>${cols.map(c => `<td class="${esc(c[0])}">${c[2] ? c[2](r) : esc(fmt(r[c[0]]))}</td>`).join("")}</tr>`).join("");
  return `<table><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}

// ---------------------------------------------------------------- sweeps

async function sweeps(args) {
  const summary = await api("/api/summary");
  if (!summary.sweeps.length) { main.innerHTML = `<h2>Sweeps</h2><p class="muted">No sweep has run in this runtime yet.</p>`; return; }
  const key = args[0] || summary.sweeps[summary.sweeps.length - 1].key;
  const [sweep, curves] = await Promise.all([api(`/api/sweeps/${encodeURIComponent(key)}`), api(`/api/sweeps/${encodeURIComponent(key)}/curves`)]);
  const tabs = summary.sweeps.map(s => `<a href="#/sweeps/${encodeURIComponent(s.key)}" class="${s.key === key ? "on" : ""}">${esc(s.name)}${s.running ? " (running)" : ""}</a>`).join(" · ");
  const { key: sk, dir } = state.sort;
  const f = state.filter.toLowerCase();
  const rows = sweep.trials.filter(t => !f || JSON.stringify([t.name, t.status, t.config, t.error]).toLowerCase().includes(f));
  rows.sort((a, b) => {
    const x = sk.startsWith("config.") ? a.config[sk.slice(7)] : a[sk], y = sk.startsWith("config.") ? b.config[sk.slice(7)] : b[sk];
    return (x === y ? 0 : x === null || x === undefined ? 1 : y === null || y === undefined ? -1 : x < y ? -1 : 1) * dir;
  });
  const configKeys = [...new Set(sweep.trials.flatMap(t => Object.keys(t.config || {})))].slice(0, 8);
  const m = sweep.metric || "metric";
  const cols = [
    ["name", "trial", r => `<a href="#/trial/${encodeURIComponent(key)}/${encodeURIComponent(r.name)}">${esc(r.name)}</a>`],
    ["status", "status", r => `<span class="status-${esc(r.status)}">${esc(r.status)}</span>`],
    ["iterations", "iter"],
    ["latest", `${m} (latest)`],
    ["best", `${m} (best${sweep.mode ? ", " + sweep.mode : ""})`],
    ...configKeys.map(k => [`config.${k}`, k, r => esc(fmt((r.config || {})[k]))]),
    ["error", "error", r => `<span class="status-error">${esc(r.error || "")}</span>`],
  ];
  const counts = Object.entries(sweep.counts).map(([s, n]) => `${n} ${esc(s)}`).join(", ");
  const focused = document.activeElement && document.activeElement.id === "filter";
  main.innerHTML = `<h2>Sweep ${esc(sweep.name)}</h2><p>${tabs}</p>
    <p class="muted">${esc(sweep.path)} · ${counts} · best: <b id="best-trial">${esc(sweep.best_trial || "none yet")}</b></p>
    <div class="card"><h3>Learning curves: ${esc(curves.metric || "no metric yet")}</h3><div id="curves"></div></div>
    <input type="search" id="filter" placeholder="filter trials (name, status, config)" value="${esc(state.filter)}">
    <div id="trials">${table(cols, rows, r => `data-trial="${esc(r.name)}" class="${r.name === sweep.best_trial ? "best" : ""}"`)}</div>`;
  const input = document.getElementById("filter");
  input.oninput = () => { state.filter = input.value; sweeps(args); };
  if (focused) { input.focus(); input.setSelectionRange(input.value.length, input.value.length); }
  main.querySelectorAll("th").forEach(th => th.onclick = () => {
    state.sort = { key: th.dataset.key, dir: state.sort.key === th.dataset.key ? -state.sort.dir : 1 };
    sweeps(args);
  });
  drawCurves(curves, sweep.best_trial);
}

function drawCurves(curves, best) {
  const el = document.getElementById("curves");
  const names = Object.keys(curves.curves).filter(n => curves.curves[n][0].length);
  el.dataset.points = names.reduce((s, n) => s + curves.curves[n][0].length, 0);
  if (!names.length) { el.innerHTML = `<p class="muted">No results yet.</p>`; return; }
  const xs = [...new Set(names.flatMap(n => curves.curves[n][0]))].sort((a, b) => a - b);
  const series = names.map(n => { const m = new Map(curves.curves[n][0].map((x, i) => [x, curves.curves[n][1][i]])); return xs.map(x => m.has(x) ? m.get(x) : null); });
  const palette = ["#4ea1ff", "#1a7f37", "#cf222e", "#8250df", "#9a6700", "#0a7ea4", "#bf3989", "#57606a"];
  const opts = {
    width: Math.max(400, el.clientWidth || 800), height: 260, legend: { show: names.length <= 12 },
    scales: { x: { time: false } }, axes: [{ label: "training_iteration" }, { label: curves.metric }],
    series: [{}, ...names.map((n, i) => ({ label: n, stroke: n === best ? "#e6a700" : palette[i % palette.length], width: n === best ? 3 : 1, spanGaps: true }))],
  };
  new uPlot(opts, [xs, ...series], el);
}

// ---------------------------------------------------------------- one trial

async function trial(args) {
  const [key, name] = args;
  const t = await api(`/api/sweeps/${encodeURIComponent(key)}/trials/${encodeURIComponent(name)}`);
  const log = state.logs[name] || (state.logs[name] = { text: "", next: -(64 << 10) });
  const chunk = await api(`/api/sweeps/${encodeURIComponent(key)}/trials/${encodeURIComponent(name)}/log?offset=${log.next}`);
  log.text = (log.text + chunk.text).slice(-(256 << 10));
  log.next = chunk.next;
  main.innerHTML = `<h2>Trial ${esc(t.name)} <span class="status-${esc(t.status)}">${esc(t.status)}</span></h2>
    <p><a href="#/sweeps/${encodeURIComponent(key)}">← sweep</a> · <span class="muted">${esc(t.path)}</span></p>
    <div class="grid"><div class="card"><h3>Config</h3><pre id="config">${esc(JSON.stringify(t.config, null, 2))}</pre></div>
    <div class="card"><h3>Checkpoints</h3>${t.checkpoints.length ? "<ul>" + t.checkpoints.map(c => `<li><code>${esc(c)}</code></li>`).join("") + "</ul>" : `<p class="muted">none</p>`}
    <h3>Last result</h3><pre>${esc(JSON.stringify(t.last_result, null, 2))}</pre></div></div>
    ${t.traceback ? `<div class="card"><h3>Error</h3><pre class="error" id="traceback">${esc(t.traceback)}</pre></div>` : ""}
    <div class="grid"><div class="card"><h3>Metric history</h3><div id="history"></div></div>
    <div class="card"><h3>Output (stdout and stderr, live)</h3><pre id="log">${esc(log.text)}</pre></div></div>`;
  const pre = document.getElementById("log"); pre.scrollTop = pre.scrollHeight;
  const el = document.getElementById("history");
  el.dataset.points = t.history.length;
  if (!t.history.length) { el.innerHTML = `<p class="muted">No results yet.</p>`; return; }
  const cols = t.columns.map((_, i) => t.history.map(r => r[i]));
  new uPlot({ width: Math.max(300, el.clientWidth || 600), height: 240, scales: { x: { time: false } },
    axes: [{ label: "training_iteration" }, {}], series: [{}, ...t.columns.slice(1).map((c, i) => ({ label: c, stroke: ["#4ea1ff", "#1a7f37", "#cf222e", "#8250df"][i % 4] }))] }, cols, el);
}

// ---------------------------------------------------------------- runtime pages

async function resources() {
  const r = await api("/api/resources");
  const nodes = r.nodes.map(n => `<div class="card"><h3>Node ${esc(n.node)} <span class="muted">${esc(n.state)}</span></h3>
    ${table([["k", "resource"], ["total", "total"], ["used", "used"], ["free", "free"], ["bar", "", x => `<div class="bar"><span style="width:${x.t ? Math.round(100 * x.u / x.t) : 0}%"></span></div>`]],
      Object.keys(n.total).map(k => ({ k, total: amount(k, n.total[k]), used: amount(k, n.used[k] || 0), free: amount(k, n.free[k] || 0), u: n.used[k] || 0, t: n.total[k] })))}</div>`).join("");
  const gangs = r.groups.map(g => `<div class="gang" data-group="${esc(g.id)}"><b>${esc(g.holder_name)}</b> <span class="muted">${esc(g.state)}, ${esc(g.strategy)}</span><br>
    ${g.bundles.map((b, i) => `<span class="bundle">bundle ${i}: ${res(b)}${g.free ? ` (free ${res(g.free[i])})` : ""}${g.nodes ? ` on ${esc(g.nodes[i])}` : ""}</span>`).join("")}
    ${g.members.length ? `<div class="muted">in it: ${g.members.map(esc).join(", ")}</div>` : ""}</div>`).join("");
  main.innerHTML = `<h2>Resources</h2><p>total ${res(r.totals.total)} · used ${res(r.totals.used)} · free ${res(r.totals.available)}</p>
    ${nodes}<div class="card"><h3>Gangs (placement groups) and their bundles</h3>${gangs || `<p class="muted">none</p>`}</div>
    <div class="card"><h3>Who holds what</h3>${table([["class", "class"], ["name", "name"], ["id", "id"], ["resources", "resources", x => res(x.resources)], ["group", "bundle", x => x.group ? esc(x.group[0] + " #" + x.group[1]) : ""]], r.holders)}</div>`;
}

const EDGE_COLOURS = { resources: "#cf222e", ask: "#8250df", spawn: "#0969da" };
const EDGE_WORDS = { resources: "waits for resources held by", ask: "awaits an answer from", spawn: "awaits the start of" };
function graphSvg(edges, id) {
  const names = [...new Set(edges.flatMap(e => [e.from, e.to]))];
  if (!names.length) return `<p class="muted">nobody waits</p>`;
  const w = 1000, h = Math.max(200, 90 * Math.ceil(names.length / 2)), cx = w / 2, cy = h / 2, rad = Math.min(cx, cy) - 40;
  const pos = new Map(names.map((n, i) => [n, [cx + rad * Math.cos(2 * Math.PI * i / names.length - Math.PI / 2), cy + rad * Math.sin(2 * Math.PI * i / names.length - Math.PI / 2)]]));
  const lines = edges.map(e => { const [x1, y1] = pos.get(e.from), [x2, y2] = pos.get(e.to);
    const qx = (x1 + x2) / 2 + (y2 - y1) * 0.15, qy = (y1 + y2) / 2 - (x2 - x1) * 0.15;  // bowed: a pair both ways shows as two
    return `<path class="edge" d="M${x1},${y1} Q${qx},${qy} ${x2},${y2}" fill="none" stroke="${EDGE_COLOURS[e.kind] || "#57606a"}" stroke-width="2" marker-end="url(#arrow-${id})"><title>${esc(e.from)} ${esc(EDGE_WORDS[e.kind] || e.kind)} ${esc(e.to)}</title></path>`; }).join("");
  const dots = names.map(n => { const [x, y] = pos.get(n); const label = n.length > 64 ? n.slice(0, 62) + "…" : n;
    return `<g class="node"><circle cx="${x}" cy="${y}" r="7" fill="#1d232a"></circle><text x="${x + 10}" y="${y - 8}" text-anchor="${x > cx + 5 ? "start" : x < cx - 5 ? "end" : "middle"}">${esc(label)}</text></g>`; }).join("");
  return `<svg class="wait-graph" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}"><defs><marker id="arrow-${id}" viewBox="0 0 10 10" refX="18" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#57606a"></path></marker></defs>${lines}${dots}</svg>`;
}

async function waits() {
  const r = await api("/api/waits");
  const dl = r.deadlocks.map((d, i) => `<div class="card deadlock"><h3>${d.kind === "asks" ? "Ask cycle" : "Resource deadlock"} at ${new Date(d.at * 1000).toLocaleTimeString()}</h3>
    ${graphSvg(d.graph, "d" + i)}<pre class="error">${esc(d.message)}</pre></div>`).join("");
  main.innerHTML = `<h2>Waits</h2>
    <div class="card"><h3>Wait-for graph now</h3><div id="waits-graph">${graphSvg(r.graph, "now")}</div>
    <p class="muted">${Object.keys(EDGE_WORDS).map(k => `<span style="color:${EDGE_COLOURS[k]}">→</span> ${EDGE_WORDS[k]}`).join(" · ")}</p></div>
    <div class="card"><h3>Pending requests (${r.pending.length}, ${r.stalled.length} stalled)</h3>
    ${table([["holder_name", "requester"], ["kind", "kind"], ["bundles", "asks for", x => x.bundles.map(res).join(" | ")], ["waited_s", "waited s", x => x.waited_s.toFixed(1)], ["stalled", "stalled", x => x.stalled ? `<b class="status-error">stalled</b>` : ""], ["reason", "why it waits"]], r.pending)}</div>
    <h3>Deadlock reports (${r.deadlocks.length})</h3><div id="deadlocks">${dl || `<p class="muted">none</p>`}</div>`;
}

async function actors() {
  const r = await api("/api/actors");
  main.innerHTML = `<h2>Actors</h2><p class="muted">${Object.entries(r.counts).map(([s, n]) => `${n} ${esc(s)}`).join(", ")}</p>
    ${table([["class", "class"], ["name", "name"], ["id", "id"], ["where", "where"], ["pid", "pid"], ["state", "state", x => `<span class="status-${x.state === "running" ? "running" : x.state === "dead" ? "error" : "pending"}">${esc(x.state)}</span>`], ["restarts", "restarts"], ["resources", "resources", x => res(x.resources)], ["waiting_on", "waiting on", x => esc(x.waiting_on.join(", "))]], r.actors)}`;
}

async function nodes() {
  const r = await api("/api/nodes");
  const head = r.head ? `<div class="card"><h3>Cluster head ${esc(r.head.address)}</h3><p>id ${esc(r.head.head_id)} · last heartbeat ${fmt(r.head.heard_s_ago)} s ago</p>
    ${table([["node", "node"], ["host", "host"], ["lost", "lost", x => esc(x.lost || "")]], r.head.agents)}</div>` : `<p class="muted">This machine alone (no cluster).</p>`;
  const cluster = r.cluster ? `<div class="card"><h3>Cluster head ${esc(r.cluster.address)}</h3><p>id ${esc(r.cluster.head_id)} · ${r.nodes.filter(n => !n.lost).length} nodes · ${r.cluster.drivers.length} drivers</p>
    ${table([["runtime_id", "driver"], ["host", "host"], ["pid", "pid"], ["heard_s_ago", "last heartbeat (s ago)", x => x.heard_s_ago.toFixed(1)]], r.cluster.drivers)}</div>` : head;
  const cols = [["node", "node"], ["state", "liveness", x => `<span class="status-${x.lost ? "error" : "running"}">${esc(x.state)}</span>`]];
  if (r.cluster) cols.push(["host", "host"], ["heard_s_ago", "last heartbeat (s ago)", x => x.heard_s_ago == null ? "" : x.heard_s_ago.toFixed(1)]);
  cols.push(["total", "total", x => res(x.total)], ["used", "used", x => res(x.used)], ["free", "free", x => res(x.free)]);
  if (r.cluster) cols.push(["lost", "why it went", x => esc(x.lost || "")]);
  main.innerHTML = `<h2>Nodes</h2>${cluster}<div id="nodes-table">${table(cols, r.nodes)}</div>`;
}

// ---------------------------------------------------------------- wiring

const pages = { sweeps, trial, resources, waits, actors, nodes };
let busy = false, again = false;
async function render() {
  if (busy) { again = true; return; }
  busy = true;
  const { page, args } = route();
  document.querySelectorAll("#nav a").forEach(a => a.classList.toggle("on", a.dataset.page === page || (page === "trial" && a.dataset.page === "sweeps")));
  try { await (pages[page] || sweeps)(args); }
  catch (e) { main.innerHTML = `<h2>${esc(page)}</h2><p class="status-error">${esc(e.message)}</p>`; }
  busy = false;
  if (again) { again = false; render(); }
}
window.addEventListener("hashchange", () => { state.filter = ""; render(); });
const events = new EventSource("/api/events");
events.onmessage = () => { document.getElementById("live").textContent = "live · " + new Date().toLocaleTimeString(); render(); };
events.onerror = () => { document.getElementById("live").textContent = "disconnected (retrying)"; };
render();
