// The fleet page: polls GET /api/fleet, follows GET /events, opens a task on request.
//
// Everything shown comes from agents and clients, so nothing is ever written as HTML: every
// value goes in with textContent. Lists are capped and live updates are applied in batches
// (FLUSH_MS), so 100 transitions a second cost a few DOM writes per batch, not one per event.
"use strict";

const KEY_ITEM = "a2a-gateway.key";
const POLL_MS = 2000;
const FLUSH_MS = 250;
const FEED_MAX = 200;      // entries kept in the live feed
const RECENT_MAX = 100;    // tasks kept in "Recent tasks"
const STREAM_MAX = 200;    // events kept for the open task's stream
const PENDING_MAX = 5000;  // events waiting for the next batch; past it the oldest are dropped
const STATE_ORDER = ["SUBMITTED", "WORKING", "INPUT_REQUIRED", "AUTH_REQUIRED", "COMPLETED", "FAILED", "CANCELLED", "REJECTED"];
// The counts and the transitions are of both protocols together: each state named in words,
// not in one protocol's spelling; a task's own state is always its protocol's (TASK_STATE_* for
// an official A2A task), next to its protocol.
const STATE_WORDS = {
  SUBMITTED: "Submitted", WORKING: "Working", INPUT_REQUIRED: "Input required", AUTH_REQUIRED: "Auth required",
  COMPLETED: "Completed", FAILED: "Failed", CANCELLED: "Cancelled", REJECTED: "Rejected",
};
const A2A_ONLY = new Set(["AUTH_REQUIRED", "REJECTED"]);
const a2aSpelling = (state) => "TASK_STATE_" + (state === "CANCELLED" ? "CANCELED" : state);
const stateWords = (state) => STATE_WORDS[state] || state;
// How each protocol spells a state the gateway counts (shown on hover).
const spellings = (state) => A2A_ONLY.has(state)
  ? `A2A only: ${a2aSpelling(state)}`
  : `Clawpedia: ${state}; A2A: ${a2aSpelling(state)}`;
const STREAM_EVENTS = ["log", "artifact.update", "status", "upstream_error", "stream.lagged", "message"];

const $ = (id) => document.getElementById(id);
const el = (tag, props, ...children) => {
  const e = document.createElement(tag);
  if (props) {
    for (const [k, v] of Object.entries(props)) {
      if (k === "text") e.textContent = v;
      else if (k === "dataset") Object.assign(e.dataset, v);
      else if (k === "on") for (const [ev, f] of Object.entries(v)) e.addEventListener(ev, f);
      else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
    }
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
};
// Times are UTC, with the date: the same on every screen and in every log.
const utc = (d) => d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
// An agent's timestamp that JavaScript cannot read (a leap second, say) is shown as sent.
const time = (iso) => {
  const d = iso ? new Date(iso) : new Date();
  if (isNaN(d)) return el("time", { text: String(iso) });
  return el("time", { datetime: d.toISOString(), text: utc(d) });
};
// Both protocols' states share the page's colours: TASK_STATE_COMPLETED is drawn as COMPLETED
// (its words stay the protocol's own).
const stateClass = (s) => "s-" + String(s || "").replace(/^TASK_STATE_/, "").replace(/^CANCELED$/, "CANCELLED");
const FINAL = new Set(["COMPLETED", "FAILED", "CANCELLED", "REJECTED"]);
const isFinal = (s) => FINAL.has(stateClass(s).slice(2));
const setText = (node, text) => { if (node.textContent !== text) node.textContent = text; };
// A task's or an agent's protocol, as a tag.
const protoTag = (protocol) => protocol === "a2a"
  ? el("span", { class: "proto proto-a2a", text: "A2A" })
  : el("span", { class: "proto proto-clawpedia", text: "Clawpedia" });

const page = {
  key: sessionStorage.getItem(KEY_ITEM),
  fleet: null,
  prev: new Map(),          // agent -> {requests, errors, t}: the rates are differences
  rows: new Map(),          // agent -> {tr, cells}
  agentIds: new Map(),      // card agent_id -> route name (task documents carry the agent_id)
  events: null,             // the /events EventSource
  pending: [],
  dropped: 0,
  paused: false,
  recent: new Map(),        // task id -> tr, newest first in the table
  seen: [],                 // arrival times of the last events, for the rate
  detail: null,             // {id, stream}
  pollTimer: null,
  gen: 0,                   // bumped when the key changes: answers for an older key are dropped
  polling: false,
  needsKey: false,
  eventsRetryAt: 0,
  firstRender: false,
  recentLoaded: false,
  samples: new Map(),       // agent -> its samples, asked for every 10 s (`?samples=false` between)
  fleetSamples: null,
  samplesAt: 0,
  // The connection, shown in one place (the header): the snapshot's state (`connecting`, `ok`,
  // `key`, or a sentence saying what failed) and the live feed's (`none`, `connecting`, `live`,
  // `reconnecting`, `refused`, `no-right`).
  conn: { snapshot: "connecting", feed: "none" },
};

// The one text saying how the page is connected: the snapshot (polled) and the live feed
// (/events) together. The live region speaks when it changes, not on every poll.
function showConnection() {
  const { snapshot, feed } = page.conn;
  let text;
  if (snapshot === "connecting") text = "Connecting…";
  else if (snapshot === "key") text = "A key is needed.";
  else if (snapshot !== "ok") text = snapshot;
  else if (feed === "live") text = "Live.";
  else if (feed === "no-right") text = "Connected, without the live feed: this key lacks the `events` right.";
  else if (feed === "reconnecting") text = "Connected; the live feed is reconnecting…";
  else if (feed === "refused") text = "Connected; the live feed was refused or closed, retrying in 10 s.";
  else text = "Connected; the live feed is connecting…";
  setText($("status"), text);
}

function setConnection(part, value) {
  page.conn[part] = value;
  showConnection();
}

// ---- talking to the gateway ---------------------------------------------------------------

function authHeaders() {
  return page.key ? { Authorization: "Bearer " + page.key } : {};
}

function withToken(path) {
  if (!page.key) return path;
  return path + (path.includes("?") ? "&" : "?") + "access_token=" + encodeURIComponent(page.key);
}

async function api(path, init = {}) {
  const res = await fetch(path, { ...init, headers: { ...authHeaders(), ...(init.headers || {}) }, cache: "no-store" });
  let body = null;
  const text = await res.text();
  try { body = text ? JSON.parse(text) : null; } catch { body = text; }
  return { status: res.status, body };
}

function errorText(r) {
  const e = r.body && r.body.error;
  return e ? `${e.code}: ${e.message}` : `HTTP ${r.status}`;
}

// ---- the key --------------------------------------------------------------------------------

function askForKey(message) {
  page.needsKey = true;
  $("enter-key").hidden = false;
  const d = $("key-dialog");
  $("key-error").textContent = message || "";
  if (!d.open) d.showModal();
  $("key").focus();
}

$("key-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const k = $("key").value.trim();
  if (!k) return;
  page.key = k;
  sessionStorage.setItem(KEY_ITEM, k);
  $("key").value = "";
  $("key-dialog").close();
  restart();
});

// The dialog may be dismissed (Escape); "Enter a key" brings it back. Without clients, the
// same button takes the admin_token, for the admin actions.
$("enter-key").addEventListener("click", () => askForKey(""));

$("forget-key").addEventListener("click", () => {
  sessionStorage.removeItem(KEY_ITEM);
  page.key = null;
  restart();
});

// Nothing seen with one key stays on screen for the next (or for none).
function resetView() {
  closeEvents();
  closeDetail();
  page.fleet = null;
  page.pending = [];
  page.seen = [];
  page.dropped = 0;
  page.prev.clear();
  page.rows.clear();
  page.recent.clear();
  page.firstRender = false;
  page.recentLoaded = false;
  page.samples = new Map();
  page.fleetSamples = null;
  page.samplesAt = 0;
  page.eventsRetryAt = 0;
  for (const id of ["feed", "task-counts", "webhook-stats", "stream-stats", "detail-stream", "transitions"]) $(id).replaceChildren();
  delete $("transitions").dataset.last;
  for (const id of ["transitions-note", "recent-note", "detail-push"]) $(id).hidden = true;
  for (const id of ["agents", "recent", "subscribers"]) $(id).tBodies[0].replaceChildren();
  for (const id of ["who", "agents-count", "feed-rate", "feed-note", "updated"]) setText($(id), "");
  page.conn = { snapshot: "connecting", feed: "none" };
  showConnection();
}

function restart() {
  page.gen += 1;
  clearTimeout(page.pollTimer);
  resetView();
  page.polling = false;
  poll();
}

// ---- the snapshot: agents, counts, webhooks, streams ----------------------------------------

// One poll at a time; none while the tab is hidden (it resumes when shown).
async function poll() {
  clearTimeout(page.pollTimer);
  if (page.polling) return;
  if (document.hidden) return;
  const gen = page.gen;
  page.polling = true;
  let r;
  // The samples change every 10 s: asked for only when the last ones are that old.
  const withSamples = Date.now() - page.samplesAt >= 10000;
  try {
    r = await api(withSamples ? "/api/fleet" : "/api/fleet?samples=false");
  } catch (e) {
    r = null;
  } finally {
    if (gen === page.gen) page.polling = false;
  }
  if (gen !== page.gen) return;
  const again = () => { page.pollTimer = setTimeout(poll, POLL_MS); };
  if (r === null) {
    setConnection("snapshot", "The gateway cannot be reached; retrying.");
    return again();
  }
  if (r.status === 401) {
    const had = page.key;
    sessionStorage.removeItem(KEY_ITEM);
    page.key = null;
    page.gen += 1;
    resetView();
    setConnection("snapshot", "key");
    askForKey(had ? "That key was not accepted (" + errorText(r) + ")." : "");
    return;
  }
  if (r.status !== 200) {
    setConnection("snapshot", "The fleet snapshot failed: " + errorText(r) + "; retrying.");
    return again();
  }
  if (withSamples) {
    page.samplesAt = Date.now();
    page.fleetSamples = r.body.samples;
    page.samples = new Map(r.body.agents.map((a) => [a.name, a.samples || []]));
  }
  page.fleet = r.body;
  render(r.body);
  if (!page.recentLoaded) {
    page.recentLoaded = true;
    // Asked again at the next poll when it could not be had.
    loadRecent(r.body.caller.rights).then((ok) => { if (!ok && gen === page.gen) page.recentLoaded = false; }, () => { if (gen === page.gen) page.recentLoaded = false; });
  }
  const mayListen = r.body.caller.rights.includes("events");
  if (!mayListen) {
    setConnection("feed", "no-right");
    feedNote();
  } else if (!page.events && Date.now() >= page.eventsRetryAt) openEvents();
  again();
}
document.addEventListener("visibilitychange", () => { if (!document.hidden) poll(); });

function render(f) {
  const who = f.caller.client
    ? `Key: ${f.caller.client}${f.caller.sees_all ? " (sees every task)" : " (sees its own tasks)"}${f.caller.admin ? ", admin" : ""}`
    : `No clients configured: everything is visible${f.caller.admin ? " (admin token accepted)" : ""}`;
  setText($("who"), who);
  $("forget-key").hidden = !page.key;
  $("enter-key").hidden = !!page.key || !(page.needsKey || !f.caller.client);
  setText($("enter-key"), f.caller.client ? "Enter a key" : "Admin token");
  setConnection("snapshot", "ok");
  setText($("updated"), `Updated ${utc(new Date(f.at))}`);
  renderAgents(f.agents);
  renderCounts(f.tasks);
  renderTransitions(page.fleetSamples);
  renderWebhooks(f.webhooks, f.caller.admin);
  renderStreams(f.streams);
}

function cardCell(a) {
  const reason = a.card_state === "fresh" ? "" : (a.last_error || (a.card_state === "stale" ? "refresh failing" : "no valid card"));
  return [a.card_state, reason];
}

function healthCell(a) {
  if (a.health === "ok") return ["ok", ""];
  const until = a.ejected_until ? ` until ${utc(new Date(a.ejected_until))}` : "";
  return [a.health, (a.ejection_reason || "") + until];
}

// An agent's replicas (`urls`, `discover = "dns"`), one line each under its health: the
// replica's address (for a caller that may read agents' errors), its health on this gateway, its
// requests in flight and the tasks pinned to it. Nothing for an agent with one replica.
function replicaList(a) {
  const rs = a.replicas || [];
  if (rs.length < 2) return null;
  const ul = el("ul", { class: "replicas", "aria-label": `Replicas of ${a.name}` });
  rs.forEach((r, i) => ul.append(el("li", { dataset: { replica: r.address || String(i + 1), state: r.health } },
    el("span", { class: "addr", text: r.address || `Replica ${i + 1}` }), " ",
    el("span", { class: `state ${stateClass(r.health)}`, text: r.health }),
    el("span", { class: "muted", text: ` · ${r.in_flight} in flight · ${r.tasks_held} ${r.tasks_held === 1 ? "task" : "tasks"}` }))));
  return ul;
}

function rate(name, a, now) {
  const p = page.prev.get(name);
  page.prev.set(name, { requests: a.requests, errors: a.errors, t: now });
  if (!p || now <= p.t || a.requests < p.requests) return ["–", "–"];
  const dt = (now - p.t) / 1000;
  return [((a.requests - p.requests) / dt).toFixed(1), ((a.errors - p.errors) / dt).toFixed(1)];
}

// A task id, shortened on screen: the whole id on hover, to assistive technology, and in a copy
// button.
function taskId(id, open) {
  const short = id.length > 12 ? id.slice(0, 8) + "…" : id;
  const b = el("button", { type: "button", class: "link", title: id, text: short, "aria-label": `Open task ${id}`, on: { click: open } });
  const copy = el("button", { type: "button", class: "copy", title: "Copy the task id", "aria-label": `Copy task id ${id}`, text: "Copy" });
  copy.addEventListener("click", async () => {
    try { await navigator.clipboard.writeText(id); setText(copy, "Copied"); } catch { setText(copy, "Copy failed"); }
    setTimeout(() => setText(copy, "Copy"), 1500);
  });
  return el("span", { class: "task-id" }, b, copy);
}

function stateSpan(state, detail) {
  const s = el("span", { class: `state ${stateClass(state)}`, text: state });
  return detail ? [s, el("br"), el("span", { class: "muted", text: detail })] : [s];
}

function renderAgents(agents) {
  const tbody = $("agents").tBodies[0];
  const now = Date.now();
  const names = new Set();
  page.agentIds.clear();
  let before = null;
  for (let i = agents.length - 1; i >= 0; i--) {
    const a = agents[i];
    names.add(a.name);
    if (a.agent_id) page.agentIds.set(a.agent_id, a.name);
    let row = page.rows.get(a.name);
    if (!row) {
      const cells = Array.from({ length: 10 }, (_, j) => el(j === 0 ? "th" : "td", j === 0 ? { scope: "row" } : (j >= 5 && j <= 7 ? { class: "num" } : j === 2 ? { class: "caps" } : j === 8 ? { class: "protocol" } : j === 9 ? { class: "charts" } : null)));
      const tr = el("tr", { dataset: { agent: a.name } }, ...cells);
      row = { tr, cells, sig: "" };
      page.rows.set(a.name, row);
    }
    const [card, cardWhy] = cardCell(a);
    const [health, healthWhy] = healthCell(a);
    const [rps, eps] = rate(a.name, a, now);
    const caps = (a.capabilities || []).join(", ");
    const samples = page.samples.get(a.name) || [];
    const lastAt = samples.length ? samples[samples.length - 1].at : "";
    const proto = a.protocol === "a2a" ? `A2A${a.binding ? " " + a.binding : ""}` : "Clawpedia";
    const reps = (a.replicas || []).map((r) => [r.address, r.health, r.in_flight, r.tasks_held].join(" ")).join("\u0001");
    const sig = [a.display_name, caps, card, cardWhy, health, healthWhy, a.in_flight, rps, eps, proto, reps].join("\u0000");
    if (row.sig !== sig) {
      row.sig = sig;
      const c = row.cells;
      setText(c[0], a.name);
      setText(c[1], a.display_name || "–");
      setText(c[2], caps || "–");
      c[3].replaceChildren(...stateSpan(card, cardWhy));
      c[3].dataset.state = card;
      c[4].replaceChildren(...stateSpan(health, healthWhy));
      const replicas = replicaList(a);
      if (replicas) c[4].append(replicas);
      c[4].dataset.state = health;
      setText(c[5], String(a.in_flight));
      setText(c[6], rps);
      setText(c[7], eps);
      c[8].replaceChildren(protoTag(a.protocol));
      if (a.protocol === "a2a" && a.binding) c[8].append(" ", el("span", { class: "muted", text: a.binding }));
      row.tr.dataset.protocol = a.protocol;
      row.tr.dataset.search = `${a.name} ${a.display_name || ""} ${caps} ${card} ${health} ${proto}`.toLowerCase();
    }
    // The pictures change with a new sample (every 10 s), not with every poll.
    if (row.charts !== lastAt || !row.cells[9].firstChild) {
      row.charts = lastAt;
      row.cells[9].replaceChildren(
        spark("requests/s", samples.map((s) => s.requests_per_sec), "requests"),
        spark("errors/s", samples.map((s) => s.errors_per_sec), "errors"),
        spark("p99 ms", samples.map((s) => s.p99_ms), "latency"));
    }
    // Keep the gateway's order without moving rows that are already in place.
    if (row.tr.parentNode !== tbody || row.tr.nextSibling !== before) tbody.insertBefore(row.tr, before);
    before = row.tr;
  }
  for (const [name, row] of page.rows) {
    if (!names.has(name)) { row.tr.remove(); page.rows.delete(name); page.prev.delete(name); }
  }
  applyFilter();
  setText($("agents-count"), `(${agents.length})`);
  if (!page.firstRender) {
    page.firstRender = true;
    performance.mark("a2a:agents-rendered");
    document.body.dataset.agentsRendered = String(agents.length);
  }
}

// ---- pictures: inline SVG built with DOM calls (no HTML strings, no outside requests) --------

const SVG_NS = "http://www.w3.org/2000/svg";
const SAMPLES = 60; // ten minutes, one every 10 s (the gateway keeps them: crate::samples)
const fmt = (v) => v === null || v === undefined ? "–" : v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);

function svg(tag, attrs) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

// A sparkline of `values` (oldest first; null for no data), named for assistive technology
// with what it shows, its last value and its highest.
function sparkLine(label, values, kind) {
  const w = 96, h = 24;
  const nums = values.filter((v) => v !== null && v !== undefined);
  const max = nums.length ? Math.max(...nums) : 0;
  const last = nums.length ? nums[nums.length - 1] : null;
  const s = svg("svg", { class: `line ${kind}`, width: w, height: h, viewBox: `0 0 ${w} ${h}`, role: "img" });
  s.setAttribute("aria-label", `${label} over the last 10 minutes: now ${fmt(last)}, highest ${fmt(max)}`);
  s.dataset.max = String(max);
  s.dataset.last = last === null ? "" : String(last);
  s.dataset.points = String(nums.length);
  s.append(svg("line", { class: "base", x1: 0, y1: h - 1, x2: w, y2: h - 1 }));
  const step = w / (SAMPLES - 1);
  const x0 = w - (values.length - 1) * step; // the newest at the right edge
  const pts = [];
  values.forEach((v, i) => {
    if (v === null || v === undefined) return;
    const y = max > 0 ? h - 1 - (v / max) * (h - 3) : h - 1;
    pts.push(`${(x0 + i * step).toFixed(1)},${y.toFixed(1)}`);
  });
  if (pts.length) {
    s.append(svg("polyline", { points: pts.join(" ") }));
    // The newest value, marked: one sample is a dot, not an invisible line.
    const [cx, cy] = pts[pts.length - 1].split(",");
    s.append(svg("circle", { cx, cy, r: 2 }));
  }
  return s;
}

function spark(label, values, kind) {
  const nums = values.filter((v) => v !== null && v !== undefined);
  const last = nums.length ? nums[nums.length - 1] : null;
  return el("span", { class: "spark", dataset: { chart: kind } }, sparkLine(label, values, kind), `${label} ${fmt(last)}`);
}

function renderTransitions(samples) {
  const ul = $("transitions");
  $("transitions-note").hidden = samples !== null && samples !== undefined;
  if (!samples) { ul.replaceChildren(); return; }
  const last = samples.length ? samples[samples.length - 1].at : "";
  if (ul.dataset.last === last && ul.children.length) return;
  ul.dataset.last = last;
  ul.replaceChildren(...STATE_ORDER.map((state) => {
    const values = samples.map((s) => (s.transitions_per_sec || {})[state] ?? null);
    return el("li", { dataset: { state }, title: spellings(state) },
      el("span", { class: `label state ${stateClass(state)}`, text: stateWords(state) }),
      sparkLine(`${stateWords(state)}: transitions per second`, values, "transitions"),
      el("span", { class: "muted", text: fmt(values.length ? values[values.length - 1] : null) }));
  }));
}

function applyFilter() {
  const q = $("agents-filter").value.trim().toLowerCase();
  for (const { tr } of page.rows.values()) tr.hidden = q !== "" && !tr.dataset.search.includes(q);
}
$("agents-filter").addEventListener("input", applyFilter);

function renderCounts(tasks) {
  const ul = $("task-counts");
  $("tasks-note").hidden = tasks !== null;
  if (!tasks || tasks.unavailable) {
    ul.replaceChildren();
    if (tasks && tasks.unavailable) ul.append(el("li", { text: "Ledger unavailable: " + tasks.unavailable }));
    return;
  }
  // The protocol's order, whatever order the object came in.
  const states = Object.keys(tasks).sort((a, b) => STATE_ORDER.indexOf(a) - STATE_ORDER.indexOf(b));
  for (const state of states) {
    const n = tasks[state];
    let li = ul.querySelector(`li[data-state="${state}"]`);
    if (!li) {
      li = el("li", { dataset: { state }, title: spellings(state) }, el("span", { class: "n" }), el("span", { class: `state s-${state}`, text: stateWords(state) }));
      ul.append(li);
    }
    setText(li.firstChild, String(n));
  }
}

function stat(dl, label, value, key) {
  let dd = dl.querySelector(`dd[data-stat="${key}"]`);
  if (!dd) {
    dl.append(el("dt", { text: label }));
    dd = el("dd", { dataset: { stat: key } });
    dl.append(dd);
  }
  setText(dd, String(value));
}

function renderWebhooks(w, admin) {
  $("webhooks-note").hidden = w !== null;
  $("admin-actions").hidden = !admin || !w;
  const dl = $("webhook-stats");
  const tbody = $("subscribers").tBodies[0];
  if (!w || w.unavailable) {
    dl.replaceChildren();
    tbody.replaceChildren();
    if (w && w.unavailable) dl.append(el("dt", { text: "Queue unavailable" }), el("dd", { text: w.unavailable }));
    return;
  }
  stat(dl, "Queue depth", w.queue_depth, "queue_depth");
  stat(dl, "Retries waiting", w.retrying, "retrying");
  stat(dl, "Dead letters", w.dead_letters, "dead_letters");
  stat(dl, "Disabled subscribers", w.subscribers.filter((s) => s.disabled).length, "disabled");
  $("redrive").disabled = w.dead_letters === 0;
  if (w.subscribers.length === 0) {
    tbody.replaceChildren(el("tr", null, el("td", { colspan: "3", class: "muted", text: "No subscribers configured." })));
    return;
  }
  tbody.replaceChildren(...w.subscribers.map((s) => {
    const state = s.disabled ? "disabled" : "active";
    const action = admin && s.disabled
      ? el("button", { type: "button", "aria-label": `Enable ${s.name}`, text: "Enable", on: { click: () => enable(s.name) } })
      : null;
    return el("tr", { dataset: { subscriber: s.name, state } },
      el("th", { scope: "row", text: s.name }),
      el("td", null, ...stateSpan(state, s.disabled || "")),
      el("td", null, action));
  }));
}

function renderStreams(s) {
  const dl = $("stream-stats");
  if (!s) { dl.replaceChildren(el("dt", { text: "Not visible with this key" }), el("dd")); return; }
  if (dl.querySelector("dt") && !dl.querySelector("dd[data-stat]")) dl.replaceChildren();
  stat(dl, "Upstream streams (to agents)", s.upstreams, "upstreams");
  stat(dl, "Subscribers (clients)", s.subscribers, "subscribers");
}

async function adminCall(path, body, done) {
  const r = await api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  setText($("admin-result"), r.status === 200 ? done(r.body) : "Refused: " + errorText(r));
  poll();
}
$("redrive").addEventListener("click", () => adminCall("/admin/dead-letters/redrive", {}, (b) => `Redriven: ${b.redriven}`));
function enable(name) {
  adminCall(`/admin/subscribers/${encodeURIComponent(name)}/enable`, {}, (b) => `Enabled ${b.subscriber}; ${b.lanes_resumed} lanes resumed`);
}

// ---- the live feed ---------------------------------------------------------------------------

function openEvents() {
  closeEvents();
  const es = new EventSource(withToken("/events"));
  page.events = es;
  setConnection("feed", "connecting");
  es.onopen = () => setConnection("feed", "live");
  es.onerror = () => {
    if (es.readyState === EventSource.CLOSED) {
      // Refused (a key without the `events` right, too many streams) or the gateway is gone:
      // try again later rather than hammer it.
      setConnection("feed", "refused");
      page.events = null;
      page.eventsRetryAt = Date.now() + 10000;
    } else {
      setConnection("feed", "reconnecting");
    }
  };
  es.addEventListener("task.status.updated", (e) => {
    const n = JSON.parse(e.data);
    const t = n.data || {};
    if (n.protocol === "a2a") {
      // An official A2A Task: its id is the agent's, its state in the protocol's words.
      queue({ kind: "transition", task_id: t.id, agent: n.agent, protocol: "a2a", status: t.status && t.status.state, at: (t.status && t.status.timestamp) || n.timestamp });
    } else {
      queue({ kind: "transition", task_id: t.task_id, agent: page.agentIds.get(t.agent_id) || t.agent_id || "?", protocol: "clawpedia", status: t.status, at: t.updated_at || n.timestamp });
    }
  });
  es.addEventListener("task.transition.refused", (e) => {
    const r = JSON.parse(e.data);
    queue({ kind: "refused", ...r });
  });
}

function closeEvents() {
  if (page.events) page.events.close();
  page.events = null;
}

function queue(ev) {
  page.pending.push(ev);
  if (page.seen.length < 100000) page.seen.push(performance.now());
  if (page.pending.length > PENDING_MAX) {
    page.dropped += page.pending.length - PENDING_MAX;
    page.pending.splice(0, page.pending.length - PENDING_MAX);
  }
}

function feedItem(ev) {
  const open = taskId(ev.task_id, () => openTask(ev.task_id, ev.agent, ev.protocol));
  if (ev.kind === "refused") {
    return el("li", { class: "refused", dataset: { kind: "refused", task: ev.task_id, reason: ev.reason, protocol: ev.protocol || "clawpedia" } },
      time(ev.at), protoTag(ev.protocol), el("span", { class: "state s-refused", text: "REFUSED" }), open,
      el("span", { text: `${ev.agent}: ${ev.recorded} → ${ev.offered} refused (${ev.reason})` }));
  }
  return el("li", { dataset: { kind: "transition", task: ev.task_id, status: ev.status, protocol: ev.protocol } },
    time(ev.at), protoTag(ev.protocol), el("span", { class: `state ${stateClass(ev.status)}`, text: ev.status }), open, el("span", { class: "muted", text: ev.agent }));
}

// What the feed's panel says of its entries (the connection is the header's to say).
function feedNote() {
  let text = "";
  if (page.conn.feed === "no-right") text = "No live feed with this key.";
  else if (page.dropped) text = `${page.dropped} events were skipped to keep up.`;
  else if (page.conn.feed === "live" && !$("feed").firstElementChild) text = "No transitions since this page opened.";
  setText($("feed-note"), text);
}

function flush() {
  const now = performance.now();
  while (page.seen.length && now - page.seen[0] > 5000) page.seen.shift();
  setText($("feed-rate"), page.seen.length ? `${(page.seen.length / 5).toFixed(1)} events/s` : "");
  feedNote();
  // Paused, or a feed entry holds the keyboard focus: entries would move or vanish under it.
  const holding = $("feed").contains(document.activeElement);
  if (page.paused || holding || page.pending.length === 0) return;
  const batch = page.pending;
  page.pending = [];
  // The feed: newest first, only the last FEED_MAX built at all.
  const feed = $("feed");
  const frag = document.createDocumentFragment();
  for (let i = batch.length - 1; i >= Math.max(0, batch.length - FEED_MAX); i--) frag.append(feedItem(batch[i]));
  feed.prepend(frag);
  while (feed.children.length > FEED_MAX) feed.lastElementChild.remove();
  feedNote();
  // Recent tasks: the latest state of each, newest first.
  const latest = new Map();
  for (const ev of batch) {
    if (ev.kind !== "transition") continue;
    const k = taskKey(ev);
    latest.delete(k); // re-inserted: the map's order is the order of last change
    latest.set(k, ev);
  }
  for (const ev of latest.values()) recentRow(ev, true);
  trimRecent();
  if (page.detail && latest.has(page.detail.key)) refreshDetail();
}

// One row of "Recent tasks", made or brought up to date; newest first (`top`), or in the order
// the listing gave (the first load).
// A task on the page: an official A2A id is only unique within its agent.
function taskKey(ev) {
  return ev.protocol === "a2a" ? `a2a:${ev.agent}/${ev.task_id}` : `clawpedia:${ev.task_id}`;
}

function recentRow(ev, top) {
  const tbody = $("recent").tBodies[0];
  const key = taskKey(ev);
  let tr = page.recent.get(key);
  if (!tr) {
    tr = el("tr", { dataset: { task: ev.task_id, key } },
      el("th", { scope: "row" }, taskId(ev.task_id, () => openTask(ev.task_id, tr.dataset.agent, tr.dataset.protocol))),
      el("td"), el("td"), el("td"), el("td"));
    page.recent.set(key, tr);
  }
  if (ev.agent) { tr.dataset.agent = ev.agent; setText(tr.cells[1], ev.agent); }
  if (ev.protocol && tr.dataset.protocol !== ev.protocol) { tr.dataset.protocol = ev.protocol; tr.cells[2].replaceChildren(protoTag(ev.protocol)); }
  tr.dataset.status = ev.status;
  tr.cells[3].replaceChildren(...stateSpan(ev.status));
  tr.cells[4].replaceChildren(time(ev.at));
  // A row holding the keyboard focus stays where it is (moving it would drop the focus).
  if (tr.contains(document.activeElement)) return;
  if (top) tbody.prepend(tr);
  else if (tr.parentNode !== tbody) tbody.append(tr);
}

function trimRecent() {
  const tbody = $("recent").tBodies[0];
  for (let row = tbody.lastElementChild; page.recent.size > RECENT_MAX && row;) {
    const prev = row.previousElementSibling;
    if (!row.contains(document.activeElement)) {
      page.recent.delete(row.dataset.key);
      row.remove();
    }
    row = prev;
  }
}

// "Recent tasks" when the page opens: the newest tasks the key may see, from the ledger
// (GET /tasks, the right `tasks`); the live feed keeps them current from then on.
async function loadRecent(rights) {
  const note = $("recent-note");
  if (!rights.includes("tasks")) {
    note.hidden = false;
    setText(note, "This key lacks the `tasks` right: it sees no tasks, so none are listed here.");
    return true;
  }
  const gen = page.gen;
  const r = await api("/tasks?page_size=50");
  if (gen !== page.gen) return true;
  if (r.status !== 200) {
    note.hidden = false;
    setText(note, "Recent tasks could not be loaded: " + errorText(r) + "; trying again.");
    return false;
  }
  note.hidden = true;
  for (const t of r.body.tasks || []) {
    // A row the live feed made meanwhile is newer than the listing's.
    const ev = { task_id: t.task_id, agent: t.agent, protocol: t.protocol, status: t.status, at: t.updated_at };
    if (page.recent.has(taskKey(ev))) continue;
    recentRow(ev, false);
  }
  trimRecent();
  if (!rights.includes("events")) {
    note.hidden = false;
    setText(note, "Listed when the page opened: without the `events` right this key gets no live feed to keep them current.");
  }
  return true;
}
setInterval(flush, FLUSH_MS);

$("feed-pause").addEventListener("click", (ev) => {
  page.paused = !page.paused;
  ev.currentTarget.setAttribute("aria-pressed", String(page.paused));
  ev.currentTarget.textContent = page.paused ? "Resume" : "Pause";
});

// ---- one task: record, artifacts, live stream ------------------------------------------------

// A download through the gateway, with the key: the bytes fetched, then saved under `name`.
// The bytes are saved, never shown: whatever type the agent claims, the page's origin (which
// holds the key) does not render them.
function downloadLink(label, name, fetchBlob) {
  const a = el("a", { href: "#", class: "download", download: name, text: label });
  a.addEventListener("click", async (ev) => {
    if (a.dataset.ready) return; // the click below follows the object URL itself
    ev.preventDefault();
    let blob = null;
    try { blob = await fetchBlob(); } catch { blob = null; }
    if (!blob) { setText(a, label + " (failed)"); return; }
    const url = URL.createObjectURL(new Blob([blob], { type: "application/octet-stream" }));
    a.href = url;
    a.dataset.ready = "1";
    a.dataset.size = String(blob.size);
    a.click();
    // One download per click: the URL goes, the link fetches again next time.
    setTimeout(() => { URL.revokeObjectURL(url); a.href = "#"; delete a.dataset.ready; }, 1000);
  });
  return a;
}

const bytes = (n) => n === undefined || n === null ? "size unknown" : n < 1024 ? `${n} B` : n < 1048576 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1048576).toFixed(1)} MiB`;

function artifactItem(id, name, type, size, link) {
  return el("li", { dataset: { artifact: id } },
    el("span", { class: "artifact-name", text: name || id }), " ",
    el("span", { class: "muted", text: `${type || "type unknown"}, ${bytes(size)}` }), " ",
    link);
}

// A Clawpedia task: /tasks/{id} and its artifacts list; content through /artifacts/{id}/content.
async function clawpediaDetail(id) {
  const r = await api(`/tasks/${encodeURIComponent(id)}`);
  if (!page.detail || page.detail.id !== id) return null;
  const a = await api(`/tasks/${encodeURIComponent(id)}/artifacts`);
  if (!page.detail || page.detail.id !== id) return null;
  const list = a.status === 200 ? (Array.isArray(a.body) ? a.body : (a.body.artifacts || [])) : null;
  const items = (list || []).map((x) => {
    const meta = x.metadata || {};
    const name = meta.filename || x.name || x.artifact_id;
    const type = meta.mime_type || x.mime_type || (x.type === "json" ? "application/json" : x.type === "file" ? null : "text/plain");
    const size = meta.size_bytes ?? (x.type !== "file" && typeof x.content === "string" ? new TextEncoder().encode(x.content).length : undefined);
    const link = downloadLink("Download", name, async () => {
      const res = await fetch(`/artifacts/${encodeURIComponent(x.artifact_id)}/content`, { headers: authHeaders(), cache: "no-store" });
      return res.ok ? res.blob() : null;
    });
    return artifactItem(x.artifact_id, name, type, size, link);
  });
  return { record: r, status: r.status === 200 ? r.body.status : null, items, artifactsError: list ? null : errorText(a) };
}

// An official A2A task: its agent's GetTask (HTTP+JSON) through the gateway; its artifacts are
// in the Task, each part downloadable as it is; the number of its push configs.
async function a2aDetail(id, agent) {
  const base = `/agents/${encodeURIComponent(agent)}/tasks/${encodeURIComponent(id)}`;
  const v = { "A2A-Version": "1.0" };
  const r = await api(base, { headers: v });
  if (!page.detail || page.detail.id !== id) return null;
  const c = await api(`${base}/pushNotificationConfigs`, { headers: v });
  if (!page.detail || page.detail.id !== id) return null;
  const task = r.status === 200 ? r.body : {};
  const items = [];
  for (const art of Array.isArray(task.artifacts) ? task.artifacts : []) {
    (Array.isArray(art.parts) ? art.parts : []).forEach((part, n) => {
      const text = typeof part.text === "string" ? part.text : part.data !== undefined ? JSON.stringify(part.data) : null;
      const raw = typeof part.raw === "string" ? part.raw : null;
      const type = part.mediaType || (part.text !== undefined ? "text/plain" : part.data !== undefined ? "application/json" : null);
      const name = part.filename || art.name || `${art.artifactId}-${n + 1}`;
      let size, blob;
      if (text !== null) { blob = () => new Blob([text], { type: type || "text/plain" }); size = new TextEncoder().encode(text).length; }
      else if (raw !== null) {
        // Decoded when asked for (a bad encoding fails that download, not the panel).
        blob = () => new Blob([Uint8Array.from(atob(raw.replace(/-/g, "+").replace(/_/g, "/")), (ch) => ch.charCodeAt(0))]);
        size = Math.floor((raw.replace(/=+$/, "").length * 3) / 4);
      }
      const link = blob ? downloadLink("Download", name, async () => blob()) : el("span", { class: "muted", text: part.url ? "a link of the agent's" : "no content" });
      items.push(artifactItem(`${art.artifactId}/${n}`, name, type, size, link));
    });
  }
  const configs = c.status === 200 ? (c.body.configs || []).length : null;
  return { record: r, status: r.status === 200 ? task.status && task.status.state : null, items, configs };
}

// One reload of the open task at a time; news meanwhile makes one more after it, so the panel
// ends with the latest and never paints an older answer over a newer one. The task's state.
async function refreshDetail() {
  const d = page.detail;
  if (!d) return null;
  if (d.busy) { d.again = true; return null; }
  d.busy = true;
  let status = null;
  try {
    do {
      d.again = false;
      status = await paintDetail(d);
    } while (d.again && page.detail === d);
  } finally {
    d.busy = false;
  }
  return status;
}

async function paintDetail(d) {
  let got;
  try {
    got = d.protocol === "a2a" ? await a2aDetail(d.id, d.agent) : await clawpediaDetail(d.id);
  } catch (e) {
    if (page.detail === d) setText($("detail-record"), "The task could not be read: " + e);
    return null;
  }
  if (!got || page.detail !== d) return null;
  const r = got.record;
  if (r.status === 200) {
    $("detail-state").replaceChildren(...stateSpan(got.status || "?"));
    $("task-detail").dataset.status = got.status || "";
    setText($("detail-record"), JSON.stringify(r.body, null, 2));
  } else {
    $("detail-state").replaceChildren();
    setText($("detail-record"), errorText(r));
  }
  const push = $("detail-push");
  push.hidden = got.configs === undefined;
  if (got.configs !== undefined) setText(push, got.configs === null ? "Push configs: not visible with this key." : `Push configs: ${got.configs}`);
  $("task-detail").dataset.pushConfigs = got.configs === undefined || got.configs === null ? "" : String(got.configs);
  const ul = $("detail-artifacts");
  // A keyboard user on a download link keeps it: the list is redrawn when it does not hold
  // the focus.
  if (!ul.contains(document.activeElement)) {
    if (got.artifactsError) ul.replaceChildren(el("li", { text: got.artifactsError }));
    else ul.replaceChildren(...(got.items.length ? got.items : [el("li", { class: "muted", text: "None yet." })]));
  }
  // A finished task's stream is over: said so, and not opened again.
  if (isFinal(got.status)) endStream(`ended: the task is ${got.status}`);
  return got.status;
}

function endStream(why) {
  if (page.detail && page.detail.stream) { page.detail.stream.close(); page.detail.stream = null; }
  setText($("detail-stream-state"), `(${why})`);
}

async function openTask(id, agent, protocol) {
  closeDetail();
  const panel = $("task-detail");
  panel.hidden = false;
  panel.dataset.task = id;
  panel.dataset.protocol = protocol || "clawpedia";
  setText($("detail-id"), id);
  $("detail-protocol").replaceChildren(protoTag(protocol));
  setText($("detail-agent"), agent ? `on ${agent}` : "");
  $("detail-record").textContent = "Loading…";
  $("detail-artifacts").replaceChildren();
  $("detail-stream").replaceChildren();
  // Nothing of the task opened before stays.
  $("detail-state").replaceChildren();
  panel.dataset.status = "";
  panel.dataset.pushConfigs = "";
  $("detail-push").hidden = true;
  setText($("detail-stream-state"), "");
  const d = { id, agent, protocol: protocol || "clawpedia", stream: null, seq: 0, busy: false, again: false };
  d.key = taskKey({ task_id: id, agent, protocol: d.protocol });
  page.detail = d;
  $("detail-heading").focus();
  const state = $("detail-stream-state");
  if (d.protocol === "a2a") {
    // The page's key is a bearer header; an EventSource sends none: the record follows the
    // live feed instead.
    setText(state, "(an A2A task: the record follows the live feed)");
    return refreshDetail();
  }
  const status = await refreshDetail();
  if (page.detail !== d || isFinal(status)) return;
  const stream = new EventSource(withToken(`/tasks/${encodeURIComponent(id)}/stream`));
  d.stream = stream;
  setText(state, "(connecting)");
  stream.onopen = () => setText(state, "(live)");
  // The gateway ends a finished task's stream with `event: status` (the task, final): the page
  // closes it there, before the connection's end would make the EventSource say it reconnects
  // and try again (to be answered 204). A stream that drops for another reason is retried by
  // the EventSource itself, unless the record already says the task is final.
  stream.onerror = () => {
    if (page.detail?.stream !== stream) return stream.close();
    const known = $("task-detail").dataset.status;
    if (stream.readyState !== EventSource.CLOSED && !isFinal(known)) return setText(state, "(reconnecting)");
    endStream(isFinal(known) ? `ended: the task is ${known}` : "ended");
    refreshDetail();
  };
  for (const name of STREAM_EVENTS) {
    stream.addEventListener(name, (e) => {
      const ol = $("detail-stream");
      ol.prepend(el("li", { dataset: { event: name } }, time(), el("span", { class: "state", text: name }), el("code", { text: e.data })));
      while (ol.children.length > STREAM_MAX) ol.lastElementChild.remove();
      if (page.detail?.stream === stream) {
        const ended = finalStatusOf(name, e.data);
        if (ended) endStream(`ended: the task is ${ended}`);
      }
      if (name === "artifact.update" || name === "status") refreshDetail();
    });
  }
}

// The final state a stream event announces: the gateway's last event, `status`, carries the
// task whose state is final. Anything else (an agent's own events) announces none.
function finalStatusOf(name, data) {
  if (name !== "status") return null;
  try {
    const s = JSON.parse(data).status;
    return typeof s === "string" && isFinal(s) ? s : null;
  } catch {
    return null;
  }
}

function closeDetail() {
  if (page.detail && page.detail.stream) page.detail.stream.close();
  page.detail = null;
  $("task-detail").hidden = true;
}
$("detail-close").addEventListener("click", () => { closeDetail(); $("recent-heading").focus(); });
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && page.detail && !$("key-dialog").open) {
    closeDetail();
    $("recent-heading").focus();
  }
});

poll();
