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
// An agent's timestamp that JavaScript cannot read (a leap second, say) is shown as sent.
const time = (iso) => {
  const d = iso ? new Date(iso) : new Date();
  if (isNaN(d)) return el("time", { text: String(iso) });
  return el("time", { datetime: d.toISOString(), text: d.toLocaleTimeString() });
};
const setText = (node, text) => { if (node.textContent !== text) node.textContent = text; };

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
};

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
  page.eventsRetryAt = 0;
  for (const id of ["feed", "task-counts", "webhook-stats", "stream-stats", "detail-stream"]) $(id).replaceChildren();
  for (const id of ["agents", "recent", "subscribers"]) $(id).tBodies[0].replaceChildren();
  for (const id of ["who", "agents-count", "feed-rate", "updated"]) setText($(id), "");
  setText($("feed-state"), "Not connected.");
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
  try {
    r = await api("/api/fleet");
  } catch (e) {
    r = null;
  } finally {
    if (gen === page.gen) page.polling = false;
  }
  if (gen !== page.gen) return;
  const again = () => { page.pollTimer = setTimeout(poll, POLL_MS); };
  if (r === null) {
    setText($("status"), "The gateway cannot be reached; retrying.");
    return again();
  }
  if (r.status === 401) {
    const had = page.key;
    sessionStorage.removeItem(KEY_ITEM);
    page.key = null;
    page.gen += 1;
    resetView();
    setText($("status"), "A key is needed.");
    askForKey(had ? "That key was not accepted (" + errorText(r) + ")." : "");
    return;
  }
  if (r.status !== 200) {
    setText($("status"), "The fleet snapshot failed: " + errorText(r) + "; retrying.");
    return again();
  }
  page.fleet = r.body;
  render(r.body);
  const mayListen = r.body.caller.rights.includes("events");
  if (!mayListen) setText($("feed-state"), "This key lacks the `events` right: no live feed.");
  else if (!page.events && Date.now() >= page.eventsRetryAt) openEvents();
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
  // The live region speaks only when the connection changes, not on every poll.
  setText($("status"), "Connected.");
  setText($("updated"), `Updated ${new Date(f.at).toLocaleTimeString()}`);
  renderAgents(f.agents);
  renderCounts(f.tasks);
  renderWebhooks(f.webhooks, f.caller.admin);
  renderStreams(f.streams);
}

function cardCell(a) {
  const reason = a.card_state === "fresh" ? "" : (a.last_error || (a.card_state === "stale" ? "refresh failing" : "no valid card"));
  return [a.card_state, reason];
}

function healthCell(a) {
  if (a.health === "ok") return ["ok", ""];
  const until = a.ejected_until ? ` until ${new Date(a.ejected_until).toLocaleTimeString()}` : "";
  return [a.health, (a.ejection_reason || "") + until];
}

function rate(name, a, now) {
  const p = page.prev.get(name);
  page.prev.set(name, { requests: a.requests, errors: a.errors, t: now });
  if (!p || now <= p.t || a.requests < p.requests) return ["–", "–"];
  const dt = (now - p.t) / 1000;
  return [((a.requests - p.requests) / dt).toFixed(1), ((a.errors - p.errors) / dt).toFixed(1)];
}

function stateSpan(state, detail) {
  const s = el("span", { class: `state s-${state}`, text: state });
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
      const cells = Array.from({ length: 8 }, (_, j) => el(j === 0 ? "th" : "td", j === 0 ? { scope: "row" } : (j >= 5 ? { class: "num" } : j === 2 ? { class: "caps" } : null)));
      const tr = el("tr", { dataset: { agent: a.name } }, ...cells);
      row = { tr, cells, sig: "" };
      page.rows.set(a.name, row);
    }
    const [card, cardWhy] = cardCell(a);
    const [health, healthWhy] = healthCell(a);
    const [rps, eps] = rate(a.name, a, now);
    const caps = (a.capabilities || []).join(", ");
    const sig = [a.display_name, caps, card, cardWhy, health, healthWhy, a.in_flight, rps, eps].join("\u0000");
    if (row.sig !== sig) {
      row.sig = sig;
      const c = row.cells;
      setText(c[0], a.name);
      setText(c[1], a.display_name || "–");
      setText(c[2], caps || "–");
      c[3].replaceChildren(...stateSpan(card, cardWhy));
      c[3].dataset.state = card;
      c[4].replaceChildren(...stateSpan(health, healthWhy));
      c[4].dataset.state = health;
      setText(c[5], String(a.in_flight));
      setText(c[6], rps);
      setText(c[7], eps);
      row.tr.dataset.search = `${a.name} ${a.display_name || ""} ${caps} ${card} ${health}`.toLowerCase();
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
      li = el("li", { dataset: { state } }, el("span", { class: "n" }), el("span", { class: `state s-${state}`, text: state }));
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
  es.onopen = () => setText($("feed-state"), "Live.");
  es.onerror = () => {
    if (es.readyState === EventSource.CLOSED) {
      // Refused (a key without the `events` right, too many streams) or the gateway is gone:
      // try again later rather than hammer it.
      setText($("feed-state"), "The live feed was refused or closed; retrying in 10 s.");
      page.events = null;
      page.eventsRetryAt = Date.now() + 10000;
    } else {
      setText($("feed-state"), "Reconnecting…");
    }
  };
  es.addEventListener("task.status.updated", (e) => {
    const n = JSON.parse(e.data);
    const t = n.data || {};
    queue({ kind: "transition", task_id: t.task_id, agent: page.agentIds.get(t.agent_id) || t.agent_id || "?", status: t.status, at: t.updated_at || n.timestamp });
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
  const open = el("button", { type: "button", class: "link", text: ev.task_id, "aria-label": `Open task ${ev.task_id}`, on: { click: () => openTask(ev.task_id) } });
  if (ev.kind === "refused") {
    return el("li", { class: "refused", dataset: { kind: "refused", task: ev.task_id, reason: ev.reason } },
      time(ev.at), el("span", { class: "state s-refused", text: "REFUSED" }), open,
      el("span", { text: `${ev.agent}: ${ev.recorded} → ${ev.offered} refused (${ev.reason})` }));
  }
  return el("li", { dataset: { kind: "transition", task: ev.task_id, status: ev.status } },
    time(ev.at), el("span", { class: `state s-${ev.status}`, text: ev.status }), open, el("span", { class: "muted", text: ev.agent }));
}

function flush() {
  const now = performance.now();
  while (page.seen.length && now - page.seen[0] > 5000) page.seen.shift();
  setText($("feed-rate"), page.seen.length ? `${(page.seen.length / 5).toFixed(1)} events/s` : "");
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
  if (page.dropped) {
    setText($("feed-state"), `Live. ${page.dropped} events were skipped to keep up.`);
  }
  // Recent tasks: the latest state of each, newest first.
  const latest = new Map();
  for (const ev of batch) {
    if (ev.kind !== "transition") continue;
    latest.delete(ev.task_id); // re-inserted: the map's order is the order of last change
    latest.set(ev.task_id, ev);
  }
  const tbody = $("recent").tBodies[0];
  for (const ev of latest.values()) {
    let tr = page.recent.get(ev.task_id);
    if (!tr) {
      tr = el("tr", { dataset: { task: ev.task_id } },
        el("th", { scope: "row" }, el("button", { type: "button", class: "link", text: ev.task_id, "aria-label": `Open task ${ev.task_id}`, on: { click: () => openTask(ev.task_id) } })),
        el("td", { text: ev.agent }), el("td"), el("td"));
      page.recent.set(ev.task_id, tr);
    }
    tr.dataset.status = ev.status;
    tr.cells[2].replaceChildren(...stateSpan(ev.status));
    tr.cells[3].replaceChildren(time(ev.at));
    // A row holding the keyboard focus stays where it is (moving it would drop the focus).
    if (!tr.contains(document.activeElement)) tbody.prepend(tr);
  }
  for (let row = tbody.lastElementChild; page.recent.size > RECENT_MAX && row;) {
    const prev = row.previousElementSibling;
    if (!row.contains(document.activeElement)) {
      page.recent.delete(row.dataset.task);
      row.remove();
    }
    row = prev;
  }
  if (page.detail && latest.has(page.detail.id)) loadRecord(page.detail.id);
}
setInterval(flush, FLUSH_MS);

$("feed-pause").addEventListener("click", (ev) => {
  page.paused = !page.paused;
  ev.currentTarget.setAttribute("aria-pressed", String(page.paused));
  ev.currentTarget.textContent = page.paused ? "Resume" : "Pause";
});

// ---- one task: record, artifacts, live stream ------------------------------------------------

async function loadRecord(id) {
  const r = await api(`/tasks/${encodeURIComponent(id)}`);
  if (!page.detail || page.detail.id !== id) return;
  if (r.status === 200) {
    $("detail-state").replaceChildren(...stateSpan(r.body.status || "?"));
    $("task-detail").dataset.status = r.body.status || "";
    setText($("detail-record"), JSON.stringify(r.body, null, 2));
  } else {
    $("detail-state").replaceChildren();
    setText($("detail-record"), errorText(r));
  }
}

async function loadArtifacts(id) {
  const r = await api(`/tasks/${encodeURIComponent(id)}/artifacts`);
  if (!page.detail || page.detail.id !== id) return;
  const ul = $("detail-artifacts");
  if (r.status !== 200) { ul.replaceChildren(el("li", { text: errorText(r) })); return; }
  const list = Array.isArray(r.body) ? r.body : (r.body.artifacts || []);
  ul.replaceChildren(...(list.length ? list.map((a) => el("li", { dataset: { artifact: a.artifact_id } },
    el("code", { text: a.artifact_id }), ` ${a.name || ""} ${a.mime_type || a.media_type || ""}`)) : [el("li", { class: "muted", text: "None yet." })]));
}

function openTask(id) {
  closeDetail();
  const panel = $("task-detail");
  panel.hidden = false;
  panel.dataset.task = id;
  setText($("detail-id"), id);
  $("detail-record").textContent = "Loading…";
  $("detail-artifacts").replaceChildren();
  $("detail-stream").replaceChildren();
  const stream = new EventSource(withToken(`/tasks/${encodeURIComponent(id)}/stream`));
  page.detail = { id, stream };
  const state = $("detail-stream-state");
  setText(state, "(connecting)");
  stream.onopen = () => setText(state, "(live)");
  // A stream that ends with its task is answered 204 when the EventSource comes back, which
  // closes it; a dropped connection is retried by the EventSource itself.
  stream.onerror = () => {
    if (page.detail?.stream !== stream) return stream.close();
    if (stream.readyState !== EventSource.CLOSED) return setText(state, "(reconnecting)");
    setText(state, "(ended)");
    loadRecord(id);
    loadArtifacts(id);
  };
  for (const name of STREAM_EVENTS) {
    stream.addEventListener(name, (e) => {
      const ol = $("detail-stream");
      ol.prepend(el("li", { dataset: { event: name } }, time(), el("span", { class: "state", text: name }), el("code", { text: e.data })));
      while (ol.children.length > STREAM_MAX) ol.lastElementChild.remove();
      if (name === "artifact.update") loadArtifacts(id);
      if (name === "status") loadRecord(id);
    });
  }
  loadRecord(id);
  loadArtifacts(id);
  $("detail-heading").focus();
}

function closeDetail() {
  if (page.detail) page.detail.stream.close();
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
