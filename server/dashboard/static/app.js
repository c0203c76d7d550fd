// The sluice dashboard: reads the server's HTTP/JSON API (Connect
// protocol) with the tab's API token, if the server wants one.
"use strict";

const state = {
  view: "entities", token: sessionStorage.getItem("sluice-token") || "", entities: [], timer: null,
  // The entity page's: its path, and where the browse stands (from:
  // the first sequence number shown, back: the pages before, next: the
  // next page's first, 0 at the end).
  entity: "", browse: { from: 1, back: [], next: 0 },
  // browses counts the browses started: one that finds a later one
  // started draws nothing (the page shows the last asked for).
  browses: 0,
};

// call makes a unary call and returns its JSON answer.
async function call(service, method, body) {
  const headers = { "Content-Type": "application/json" };
  if (state.token) headers.Authorization = "Bearer " + state.token;
  const res = await fetch(`/sluice.v1.${service}/${method}`, { method: "POST", headers, body: JSON.stringify(body || {}) });
  const text = await res.text();
  const json = text ? JSON.parse(text) : {};
  if (!res.ok) throw apiError(res.status, json);
  return json;
}

// stream makes a server-streaming call in the Connect protocol's envelopes
// and returns its messages.
async function stream(service, method, body) {
  const headers = { "Content-Type": "application/connect+json" };
  if (state.token) headers.Authorization = "Bearer " + state.token;
  const payload = new TextEncoder().encode(JSON.stringify(body || {}));
  const frame = new Uint8Array(5 + payload.length);
  new DataView(frame.buffer).setUint32(1, payload.length);
  frame.set(payload, 5);
  const res = await fetch(`/sluice.v1.${service}/${method}`, { method: "POST", headers, body: frame });
  const buf = new Uint8Array(await res.arrayBuffer());
  if (!res.ok) throw apiError(res.status, JSON.parse(new TextDecoder().decode(buf) || "{}"));
  const messages = [];
  for (let at = 0; at + 5 <= buf.length;) {
    const flags = buf[at];
    const len = new DataView(buf.buffer, buf.byteOffset + at + 1, 4).getUint32(0);
    const json = JSON.parse(new TextDecoder().decode(buf.subarray(at + 5, at + 5 + len)) || "{}");
    at += 5 + len;
    if (flags & 2) { // the end of the stream, with its error if any
      if (json.error) throw apiError(200, json.error);
      break;
    }
    messages.push(json);
  }
  return messages;
}

function apiError(status, json) {
  const e = new Error(json.message || json.code || `HTTP ${status}`);
  e.code = json.code;
  return e;
}

function setStatus(text, error) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.className = error ? "error" : "";
}

// el builds an element with text or children.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

const num = (v) => el("td", { class: "num" }, Number(v || 0).toLocaleString());
const int = (v) => Number(v || 0);

function age(duration) {
  const s = parseFloat(duration || "0");
  if (s === 0) return "";
  if (s < 60) return s.toFixed(1) + " s";
  if (s < 3600) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(1) + " h";
}

function when(ts) {
  return ts ? new Date(ts).toLocaleTimeString() : "";
}

// windowRange is the positions a cache window holds, "first-last" (an
// empty one "first-(empty)"), marked * when it is the head window.
function windowRange(w) {
  const start = int(w.start), end = int(w.end);
  return `${start}-${end < start ? "(empty)" : end}${w.head ? "*" : ""}`;
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

async function allEntities() {
  let after = "", out = [];
  for (;;) {
    const page = (await call("EntityService", "ListEntityStats", { after, max: 1000 })).entities || [];
    out = out.concat(page);
    if (page.length < 1000) return out;
    after = page[page.length - 1].entity;
  }
}

const views = {
  async entities() {
    state.entities = await allEntities();
    fill(document.querySelector("#entities-table tbody"), state.entities.map((e) => {
      const s = e.stats || {};
      const row = el("tr", { class: int(s.deadLettered) > 0 ? "bad" : "", "data-entity": e.entity, title: "open " + e.entity },
        el("td", {}, e.entity), el("td", {}, e.topic ? "subscription" : "queue"),
        num(s.active), num(s.expired), num(s.inFlight), num(s.scheduled), num(s.deferred), num(s.deadLettered),
        el("td", {}, age(s.oldestAge)), el("td", {}, age(s.oldestDeferredAge)));
      row.addEventListener("click", () => openEntity(e.entity));
      return row;
    }));
  },

  async entity() {
    const path = state.entity;
    const sub = isSubscription(path);
    document.getElementById("entity-title").textContent = (sub ? "Subscription " : "Queue ") + path;
    let props = {}, rules = [], forward = "";
    if (sub) {
      const at = path.indexOf(subscriptionsSep);
      const s = (await call("EntityService", "GetSubscription", { topic: path.slice(0, at), name: path.slice(at + subscriptionsSep.length) })).subscription || {};
      props = s.properties || {};
      rules = s.rules || [];
    } else {
      const q = (await call("EntityService", "GetQueue", { name: path })).queue || {};
      props = q.properties || {};
      forward = q.forwardTo || "";
    }
    // The API's JSON leaves out what is false, zero or empty.
    const settings = (sub ? subscriptionSettings : queueSettings).map((k) => [k, k === "forwardTo" && !sub ? forward : props[k]]);
    fill(document.querySelector("#entity-props tbody"), settings.map(([k, v]) =>
      el("tr", { "data-setting": k }, el("td", { class: "key" }, words(k)), el("td", {}, setting(v, k)))));
    document.getElementById("entity-rules").replaceChildren(...rules.map((r) => el("li", { "data-rule": r.name }, `rule ${r.name}: ${ruleText(r)}`)));
    const st = (await call("EntityService", "GetEntityStats", { entity: path })).stats || {};
    const counts = [["active", num(st.active)], ["expired", num(st.expired)], ["in flight", num(st.inFlight)],
      ["scheduled", num(st.scheduled)], ["deferred", num(st.deferred)], ["dead-lettered", num(st.deadLettered)],
      ["oldest active", el("td", {}, age(st.oldestAge) || "-")], ["oldest deferred", el("td", {}, age(st.oldestDeferredAge) || "-")]];
    fill(document.querySelector("#entity-counts tbody"), counts.map(([k, cell]) => el("tr", { "data-count": k }, el("td", { class: "key" }, k), cell)));
    await drawHistory(path);
    document.getElementById("entity-purge").disabled = int(st.deadLettered) === 0;
    document.getElementById("entity-purge-messages").disabled =
      int(st.active) + int(st.expired) + int(st.scheduled) + int(st.deferred) === 0;
    document.getElementById("entity-cancel").hidden = sub; // a topic's scheduled messages are cancelled on the topic
    await browse();
  },

  async topics() {
    const topics = (await call("EntityService", "ListTopics", { max: 1000 })).topics || [];
    const blocks = [];
    for (const t of topics) {
      const subs = (await call("EntityService", "ListSubscriptions", { topic: t.name })).subscriptions || [];
      blocks.push(el("div", { class: "topic", "data-topic": t.name }, el("strong", {}, t.name),
        el("ul", {}, ...subs.map((s) => {
          const path = t.name + subscriptionsSep + s.name;
          const link = el("a", { href: "#entity/" + encodeURIComponent(path), "data-subscription": path }, s.name);
          const rules = (s.rules || []).map((r) => `${r.name}: ${ruleText(r)}`).join("; ");
          return el("li", {}, link, " ", el("span", { class: "rules" }, rules || "no rules: receives nothing"));
        }))));
    }
    document.getElementById("topics-list").replaceChildren(...(blocks.length ? blocks : [el("p", {}, "No topics.")]));
  },

  async streams() {
    const st = await call("ClusterService", "GetClusterStatus", {});
    fill(document.querySelector("#nodes-table tbody"), (st.nodes || []).map((n) =>
      el("tr", { class: n.alive ? "" : "bad" }, el("td", {}, n.id), el("td", {}, n.group || "(default)"),
        el("td", {}, (n.consumers || []).join(", ")), el("td", {}, n.address || ""), el("td", {}, n.alive ? "yes" : "no"),
        el("td", {}, (n.partitions || []).join(" ")), el("td", {}, when(n.startedAt)), el("td", {}, when(n.heartbeatAt)))));
    fill(document.querySelector("#partitions-table tbody"), (st.partitions || []).map((p) =>
      el("tr", { class: p.held ? "" : "bad", "data-partition": int(p.partition) }, num(p.partition),
        el("td", {}, (p.leases || []).map((l) => `${l.owner || "none"}${l.group ? " [" + l.group + "]" : ""}`).join(", ")),
        num(p.epoch), el("td", {}, p.held ? "yes" : "no"),
        num(p.head), num(p.checkpoint), num(p.lag),
        // What each owner's cache holds, lease by lease as the owners.
        el("td", {}, (p.leases || []).map((l) => l.held ? `${int(l.cachedRecords).toLocaleString()} in ${int(l.cacheWindows)}` : "-").join(", ")),
        el("td", {}, (p.subscriptions || []).map((s) => `${subscriptionName(s)} (${int(s.lag)})`).join(", ")))));
    // Consumers with subscriptions that no live node serves hold their
    // partitions' checkpoints and retention back.
    const served = new Set((st.nodes || []).filter((n) => n.alive).flatMap((n) => n.consumers || []));
    const unserved = [...new Set((st.partitions || []).flatMap((p) => (p.subscriptions || []).map((s) => s.consumer))
      .filter((c) => c && !served.has(c)))].sort();
    const warn = document.getElementById("unserved");
    warn.hidden = !unserved.length;
    warn.textContent = unserved.length ? `No live processor serves ${unserved.join(", ")}: their subscriptions hold their partitions' ` +
      "checkpoints and retention back." : "";
    // Each subscription once, its lag over its partitions.
    const bySub = new Map();
    for (const p of st.partitions || []) {
      for (const s of p.subscriptions || []) {
        const seen = bySub.get(s.id);
        if (seen) seen.lag += int(s.lag);
        else bySub.set(s.id, { ...s, lag: int(s.lag) });
      }
    }
    fill(document.querySelector("#stream-subs-table tbody"), [...bySub.values()].filter((s) => s.consumer)
      .sort((a, b) => (a.consumer + a.id).localeCompare(b.consumer + b.id)).map((s) => {
        const parked = el("button", { type: "button", "data-action": "parked" }, "Parked events");
        parked.addEventListener("click", () => showParked(s.id, subscriptionName(s)));
        const actions = el("td", {}, parked);
        if (s.fault) {
          const clear = el("button", { type: "button", "data-action": "clear-fault" }, "Clear fault");
          clear.addEventListener("click", () => clearFault(s.id));
          actions.append(" ", clear);
        }
        return el("tr", { "data-subscription": s.id, class: s.fault || !served.has(s.consumer) ? "bad" : "" },
          el("td", {}, s.consumer), el("td", {}, `${s.namespace}/${s.key || "*"}`), el("td", {}, s.id),
          el("td", {}, served.has(s.consumer) ? "yes" : "no"), num(s.lag), el("td", {}, s.fault || ""), actions);
      }));
    await drawLag([...bySub.values()]);
    const ids = new Set((st.partitions || []).flatMap((p) => (p.subscriptions || []).map((s) => s.id)));
    document.getElementById("reposition-subs").replaceChildren(...[...ids].sort().map((id) => el("option", { value: id })));
    const consumers = [...new Set((st.nodes || []).flatMap((n) => n.consumers || []))].sort();
    const rows = [], windowRows = [], subRows = [];
    for (const consumer of consumers) {
      let stats;
      try {
        stats = await call("StreamService", "GetConsumerStats", { consumer });
      } catch {
        continue; // run by another server or by an application, or not ours to see
      }
      for (const p of stats.partitions || []) {
        const windows = p.windows || [];
        const reads = int(p.rehydrationReads);
        rows.push(el("tr", { "data-consumer": consumer, "data-partition": int(p.partition), class: p.stopped ? "bad" : "" },
          el("td", {}, consumer), num(p.partition), num(p.epoch), num(p.read),
          num(p.proposedCheckpoint), num(p.storedCheckpoint), num(p.cachedRecords),
          num(windows.length), el("td", { class: "resident" }, windows.map(windowRange).join(" ")),
          el("td", {}, `${int(p.splits)}/${int(p.merges)}`), num(p.resets),
          el("td", {}, reads ? `${int(p.rehydratedRecords).toLocaleString()} in ${reads.toLocaleString()} reads` : ""),
          el("td", {}, `${int(p.readsAvoided).toLocaleString()}/${int(p.duplicateReads).toLocaleString()}`),
          num(p.reclaimed), num(p.retentionGaps), num(p.laggingHeld)));
        // A window is under pressure when its members want records it
        // has no room to read.
        windows.forEach((w, i) => {
          const pressure = int(w.wanted) > 0 && int(w.room) === 0;
          windowRows.push(el("tr", { "data-consumer": consumer, "data-partition": int(p.partition), "data-window": i, class: pressure ? "bad" : "" },
            el("td", {}, consumer), num(p.partition), num(i), el("td", { class: "resident" }, windowRange(w)),
            num(w.records), num(w.bytes), num(w.members), num(w.room), num(w.wanted),
            el("td", {}, pressure ? "yes" : "no"), el("td", {}, w.stream || "")));
        });
        // The subscriptions this consumer delivers; the others of the
        // partition are other consumers'.
        for (const s of (p.subscriptions || []).filter((s) => s.handled)) {
          const w = s.window === undefined ? undefined : windows[s.window];
          subRows.push(el("tr", { "data-subscription": s.id, "data-partition": int(p.partition), class: s.fault ? "bad" : "" },
            el("td", {}, consumer), num(p.partition), el("td", {}, s.id), num(s.position), num(s.cursor), num(s.inFlight),
            el("td", {}, w ? `${s.window}: ${windowRange(w)}` : "none"), el("td", {}, s.fault || "")));
        }
      }
    }
    fill(document.querySelector("#consumers-table tbody"), rows);
    fill(document.querySelector("#cache-windows-table tbody"), windowRows);
    fill(document.querySelector("#consumer-subs-table tbody"), subRows);
  },

  async throughput() {
    const t = await call("StatsService", "GetThroughput", {});
    document.getElementById("throughput-chart").replaceChildren(chart(t.samples || []));
  },

  async deadletters() {
    if (!state.entities.length) state.entities = await allEntities();
    const select = document.getElementById("dlq-entity");
    const chosen = select.value;
    const names = state.entities.map((e) => e.entity);
    select.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
    const dead = state.entities.find((e) => int((e.stats || {}).deadLettered) > 0);
    select.value = names.includes(chosen) ? chosen : dead ? dead.entity : names[0] || "";
    await showDeadLetters();
  },
};

const subscriptionsSep = "/Subscriptions/";
const isSubscription = (path) => path.includes(subscriptionsSep);

// words turns an API field name into words: "lockDuration", "lock duration".
const words = (k) => k.replace(/([A-Z])/g, " $1").toLowerCase();

// The settings of each kind, in the order the CLI shows them.
const queueSettings = ["lockDuration", "maxDeliveryCount", "defaultTtl", "deadLetterOnExpiry", "deadLetterRetention",
  "maxMessageSize", "requiresDuplicateDetection", "duplicateDetectionWindow", "requiresSession", "partitionCount", "forwardTo"];
const subscriptionSettings = ["lockDuration", "maxDeliveryCount", "defaultTtl", "deadLetterOnExpiry", "deadLetterRetention",
  "requiresSession", "forwardTo", "ignoreFilterErrors"];
const flags = new Set(["deadLetterOnExpiry", "requiresDuplicateDetection", "requiresSession", "ignoreFilterErrors"]);

// setting shows a setting's value (v undefined: the API left out its
// zero): a duration for people, the longest one as "none" (it means
// never).
function setting(v, k) {
  if (flags.has(k)) return v ? "yes" : "no";
  if (v === undefined || v === "") return k === "forwardTo" ? "-" : "0";
  if (typeof v === "string" && /^\d+(\.\d+)?s$/.test(v)) return parseFloat(v) >= 9223372036 ? "none" : age(v) || "0 s";
  return String(v);
}

function ruleText(r) {
  if (r.sqlFilter) return r.sqlFilter.expression;
  if (r.trueFilter) return "every message";
  if (r.falseFilter) return "no message";
  if (r.correlationFilter) {
    const f = r.correlationFilter;
    const parts = Object.entries(f).filter(([k]) => k !== "properties").map(([k, v]) => `${words(k)} = ${v}`);
    for (const [k, v] of Object.entries(f.properties || {})) parts.push(`${k} = ${v}`);
    return parts.join(" and ");
  }
  return "";
}

const stateNames = { MESSAGE_STATE_ACTIVE: "active", MESSAGE_STATE_LOCKED: "locked", MESSAGE_STATE_SCHEDULED: "scheduled",
  MESSAGE_STATE_DEFERRED: "deferred", MESSAGE_STATE_EXPIRED: "expired" };
const pageSize = 50;

// countSeries are the entity chart's lines: a count's key, colour.
const countSeries = [["active", "#2d6cdf"], ["inFlight", "#2f8a4c"], ["scheduled", "#8a63d2"], ["deferred", "#b8860b"],
  ["deadLettered", "#c2362b"], ["expired", "#7a7f8c"]];

// every says how often the server samples, from the API's interval
// ("10s", "0.250s").
function every(interval) {
  const s = parseFloat(interval || "0");
  return "every " + (s > 0 && s < 1 ? Math.round(s * 1000) + " ms" : age(interval) || "interval");
}

// drawHistory draws an entity's counts by state and this server's rates
// of its messages over the last hour, as the server sampled them.
async function drawHistory(path) {
  const h = await call("StatsService", "GetEntityHistory", { entity: path });
  if (state.view !== "entity" || state.entity !== path) return; // another page opened meanwhile
  const samples = h.samples || [];
  const sampled = "sampled by the server " + every(h.interval);
  document.getElementById("entity-chart").replaceChildren(chart(samples, countSeries, "messages", sampled, every(h.interval)));
  document.getElementById("entity-rates").replaceChildren(chart(samples, rateSeries, "msg/s", "through this server, " + sampled,
    every(h.interval)));
}

// refreshHistory draws the open entity's history again.
async function refreshHistory() {
  try {
    await drawHistory(state.entity);
  } catch {
    // the next one tries again; the page says the rest
  }
}

// lagColours are the lag chart's lines' colours, one a series; app.css
// has the legend's (.lag-0 ...).
const lagColours = ["#2d6cdf", "#c2362b", "#2f8a4c", "#8a63d2", "#b8860b", "#1b9aaa", "#d45d9a", "#5b6b2f", "#e07b24", "#555b6e"];

// drawLag draws the lag over the last hour of the consumers in their
// namespaces lagging most (a line each), and of the subscription picked
// (subs: every subscription of the cluster's status, each once, with
// its lag now).
async function drawLag(subs) {
  const h = await call("StatsService", "GetStreamLagHistory", { max: lagColours.length });
  // One sample a time, a series' lag under its index (null where the
  // series has no sample then: a gap, not a zero).
  const consumers = h.consumers || [];
  const byTime = new Map();
  consumers.forEach((c, i) => {
    for (const s of c.samples || []) {
      if (!byTime.has(s.at)) byTime.set(s.at, { at: s.at, ...Object.fromEntries(consumers.map((_, j) => ["c" + j, null])) });
      byTime.get(s.at)["c" + i] = int(s.lag);
    }
  });
  const samples = [...byTime.values()].sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
  const series = consumers.map((c, i) => ["c" + i, lagColours[i], `${c.consumer} · ${c.namespace}`]);
  document.getElementById("lag-chart").replaceChildren(chart(samples, series, "records",
    `a line per consumer · namespace (the ${lagColours.length} lagging most), sampled by the server ${every(h.interval)}`,
    every(h.interval)));
  document.getElementById("lag-legend").replaceChildren(...series.map(([key, , label], i) =>
    el("span", { class: "lag-" + i, "data-series": key }, label)));
  // The subscription picked, else the one lagging most.
  const select = document.getElementById("lag-sub");
  const ids = subs.filter((s) => s.consumer).sort((a, b) => b.lag - a.lag || a.id.localeCompare(b.id));
  select.replaceChildren(...ids.map((s) => el("option", { value: s.id }, `${subscriptionName(s)} (${s.id}), lag ${s.lag}`)));
  select.value = ids.some((s) => s.id === state.lagSub) ? state.lagSub : ids.length ? ids[0].id : "";
  state.lagSub = select.value;
  await drawSubscriptionLag();
}

// drawSubscriptionLag draws the lag of the subscription picked over the
// last hour.
async function drawSubscriptionLag() {
  const id = state.lagSub, out = document.getElementById("sub-lag-chart");
  if (!id) return out.replaceChildren();
  const h = await call("StatsService", "GetStreamLagHistory", { subscription: id });
  if (state.lagSub !== id) return; // another picked meanwhile
  const sub = h.subscription || {};
  out.replaceChildren(chart(sub.samples || [], [["lag", lagColours[0]]], "records",
    `${subscriptionName(sub)}, sampled by the server ${every(h.interval)}`, every(h.interval)));
}

// openEntity shows an entity's page, its browse and search from the
// start, whether a click or the URL (replace, see show) led there.
function openEntity(path, replace) {
  state.entity = path;
  state.browse = { from: 1, back: [], next: 0 };
  document.getElementById("entity-state").value = "";
  document.getElementById("entity-find").value = "";
  show("entity", replace);
}

// showReasons fills the entity page's reason choice with its dead
// letters' reasons and counts (the choice is kept while it exists).
async function showReasons(path) {
  const select = document.getElementById("entity-reason");
  const chosen = select.value;
  const reasons = (await call("MessagingService", "ListDeadLetterReasons", { entity: path })).reasons || [];
  const total = reasons.reduce((n, r) => n + int(r.count), 0);
  select.replaceChildren(el("option", { value: "*" }, `any reason (${total})`),
    ...reasons.map((r) => el("option", { value: "=" + (r.reason || "") }, `${reasonLabel(r.reason)} (${int(r.count)})`)));
  select.value = [...select.options].some((o) => o.value === chosen) ? chosen : "*";
}

const reasonLabel = (r) => r || "(no reason)";

// filterOf is the search the browse controls ask for, as the API's
// MessageFilter: the state (not of dead letters), the dead letters'
// reason, and one field to find.
function filterOf(dead) {
  const f = {};
  const want = document.getElementById("entity-state").value;
  if (want && !dead) f.states = [want];
  const reason = document.getElementById("entity-reason").value;
  if (dead && reason.startsWith("=")) f.deadLetterReason = reason.slice(1);
  const by = document.getElementById("entity-find-by").value;
  const find = document.getElementById("entity-find").value.trim();
  if (!find) return f;
  if (by !== "property") {
    f[by] = find;
    return f;
  }
  const eq = find.indexOf("=");
  if (eq < 1) throw new Error(`find "${find}": a property is found as key=value`);
  f.applicationProperties = { [find.slice(0, eq)]: find.slice(eq + 1) };
  return f;
}

// browse lists a page of the entity's messages that match the browse
// controls, in sequence order from state.browse.from: the server
// searches (Peek with a filter), examining a bounded number of messages
// a call; a page takes at most 10 calls.
async function browse() {
  const path = state.entity, dead = document.getElementById("entity-state").value === "dead";
  const mine = ++state.browses;
  const stale = () => mine !== state.browses;
  document.getElementById("entity-reason").parentElement.hidden = !dead;
  document.getElementById("entity-prev").disabled = document.getElementById("entity-next").disabled = true;
  if (dead) {
    await showReasons(path);
    if (stale()) return;
  }
  let filter;
  try {
    filter = filterOf(dead);
  } catch (e) {
    document.getElementById("entity-page").textContent = e.message;
    return;
  }
  const shown = [];
  let from = state.browse.from, next = 0;
  for (let calls = 0; shown.length < pageSize && calls < 10; calls++) {
    const body = { entity: path, maxMessages: pageSize - shown.length, fromSequenceNumber: from, filter };
    if (dead) body.subQueue = "SUB_QUEUE_DEAD_LETTER";
    const res = await call("MessagingService", "Peek", body);
    if (stale()) return;
    shown.push(...(res.messages || []));
    next = int(res.nextSequenceNumber);
    if (!next) break;
    from = next;
  }
  state.browse.next = next;
  fill(document.querySelector("#entity-messages tbody"), shown.map((m) => {
    const st = dead ? "dead-lettered" : stateNames[m.state] || "";
    const msg = m.message || {};
    const row = el("tr", { "data-seq": m.sequenceNumber, "data-state": st, class: st === "expired" || dead ? "bad" : "" },
      el("td", {}, el("input", { type: "checkbox", value: m.sequenceNumber })), num(m.sequenceNumber), el("td", {}, st),
      el("td", {}, when(m.enqueuedTime)), num(m.deliveryCount),
      el("td", {}, when(m.expiresAt)), el("td", {}, when(m.lockedUntil)), el("td", {}, msg.messageId || ""),
      el("td", {}, msg.subject || ""), el("td", { class: "body" }, preview(msg.body)));
    row.addEventListener("click", (ev) => { if (ev.target.tagName !== "INPUT") showMessage(m, st); });
    return row;
  }));
  document.getElementById("entity-page").textContent = (shown.length
    ? `#${int(shown[0].sequenceNumber)} to #${int(shown[shown.length - 1].sequenceNumber)}` : "none") +
    (next ? (shown.length < pageSize ? `, searched to #${next - 1}` : "") : ", the last");
  document.getElementById("entity-prev").disabled = !state.browse.back.length;
  document.getElementById("entity-next").disabled = !state.browse.next;
  document.getElementById("entity-resubmit").hidden = !dead;
  document.getElementById("entity-delete").textContent = dead ? "Delete selected dead letters" : "Delete selected messages";
  document.getElementById("message-detail").hidden = true;
}

// showMessage shows everything a peek tells of a message.
function showMessage(m, st) {
  const msg = m.message || {};
  const rows = [["sequence number", int(m.sequenceNumber)], ["state", st], ["delivery count", int(m.deliveryCount)],
    ["enqueued", m.enqueuedTime], ["expires", m.expiresAt], ["locked until", m.lockedUntil],
    ["scheduled for", msg.scheduledEnqueueTime], ["delayed until", msg.delayedUntil], ["time to live", msg.timeToLive],
    ["message id", msg.messageId], ["session id", msg.sessionId], ["partition key", msg.partitionKey],
    ["correlation id", msg.correlationId], ["subject", msg.subject], ["content type", msg.contentType],
    ["reply to", msg.replyTo], ["reply-to session id", msg.replyToSessionId], ["to", msg.to],
    ["dead-letter reason", m.deadLetterReason], ["dead-letter description", m.deadLetterDescription],
    ["dead-letter source", m.deadLetterSource]];
  for (const [k, v] of Object.entries(msg.applicationProperties || {})) rows.push(["property " + k, v]);
  fill(document.querySelector("#message-props tbody"), rows.filter(([, v]) => v !== undefined && v !== "").map(([k, v]) =>
    el("tr", { "data-field": k }, el("td", { class: "key" }, k), el("td", {}, String(v)))));
  document.getElementById("message-title").textContent = `Message #${int(m.sequenceNumber)}`;
  document.getElementById("message-body").textContent = preview(msg.body);
  document.getElementById("message-detail").hidden = false;
}

// entityAction asks to confirm what it is about to do, does it, says
// what came of it, and shows the entity again.
async function entityAction(question, act) {
  const out = document.getElementById("entity-result");
  if (question && !window.confirm(question)) return;
  let said;
  try {
    said = await act();
  } catch (e) {
    said = "failed: " + e.message;
  }
  await refresh();
  out.textContent = said; // once the page shows what it did
}

const checkedSeqs = () => [...document.querySelectorAll("#entity-messages input:checked")].map((c) => c.value);

// showParked lists a subscription's parked events (the oldest 100).
async function showParked(id, name) {
  state.parked = id;
  document.getElementById("parked-title").textContent = `Parked events of ${name}`;
  document.getElementById("parked-panel").hidden = false;
  try {
    const events = (await call("StreamService", "ListParkedEvents", { subscription: id, max: 100 })).events || [];
    fill(document.querySelector("#parked-table tbody"), events.map((p) => {
      const ev = p.event || {}, sid = ev.stream || {};
      return el("tr", { "data-position": int(ev.position) }, el("td", {}, `${sid.namespace}/${sid.key}`), num(ev.partition),
        num(ev.position), num(p.attempts), el("td", {}, p.error || ""), el("td", {}, when(p.parkedAt)), el("td", { class: "body" }, preview(ev.body)));
    }));
    if (!events.length) fill(document.querySelector("#parked-table tbody"), [el("tr", {}, el("td", {}, "none"))]);
  } catch (e) {
    document.getElementById("parked-result").textContent = "failed: " + e.message;
  }
}

async function replayParked() {
  const id = state.parked, out = document.getElementById("parked-result");
  out.textContent = "replaying…";
  let said;
  try {
    const res = await call("StreamService", "ReplayParkedEvents", { subscription: id, max: 100 });
    said = res.failure ? `replayed ${int(res.delivered)}, then stopped: ${res.failure}` : `replayed ${int(res.delivered)}`;
  } catch (e) {
    said = "replay failed: " + e.message;
  }
  await showParked(id, document.getElementById("parked-title").textContent.replace(/^Parked events of /, ""));
  out.textContent = said;
}

async function clearFault(id) {
  const out = document.getElementById("stream-sub-result");
  if (!window.confirm(`Clear the fault of ${id}? Its consumer delivers its events again from its position.`)) return;
  let said;
  try {
    await call("StreamService", "ClearFault", { subscription: id });
    said = `cleared the fault of ${id}`;
  } catch (e) {
    said = "clear fault failed: " + e.message;
  }
  await refresh();
  out.textContent = said;
}

// subscriptionName names a subscription for people: its consumer and
// what it reads (a stream, or a namespace's every stream), else its id.
function subscriptionName(s) {
  if (!s.consumer) return s.id;
  return `${s.consumer} · ${s.namespace}${s.key ? "/" + s.key : "/*"}`;
}

// describeReposition is a recorded reposition on one line.
function describeReposition(r) {
  const to = { REPOSITION_TARGET_POSITION: "a position", REPOSITION_TARGET_OLDEST: "the oldest event kept", REPOSITION_TARGET_HEAD: "the head" }[r.target] || r.target;
  const moves = (r.moves || []).map((m) => `partition ${int(m.partition)}: ${int(m.from)} → ${int(m.to)}`).join(", ");
  return `to ${to}${r.by ? " by " + r.by : ""} at ${when(r.at)}; ${moves}`;
}

async function reposition() {
  const subscription = document.getElementById("reposition-sub").value.trim();
  const target = document.getElementById("reposition-to").value;
  const out = document.getElementById("reposition-result");
  const body = { subscription, target };
  if (target === "REPOSITION_TARGET_POSITION") {
    body.position = document.getElementById("reposition-position").value;
    const part = document.getElementById("reposition-partition").value;
    if (part !== "") body.partition = Number(part);
  }
  out.textContent = "repositioning…";
  try {
    const res = await call("StreamService", "RepositionStreamSubscription", body);
    out.textContent = "repositioned " + describeReposition(res.reposition || {});
    const sub = (await call("StreamService", "GetStreamSubscription", { subscription })).subscription || {};
    document.getElementById("reposition-status").textContent =
      `${sub.id}: ${int(sub.repositions)} reposition(s), the last ${sub.lastReposition ? describeReposition(sub.lastReposition) : "none"}; ` +
      (sub.fault ? "faulted: " + sub.fault : "running");
  } catch (e) {
    out.textContent = "reposition failed: " + e.message;
  }
}

// showDeadLetters shows the chosen entity's dead letters counted by
// reason, each reason with its actions, and the oldest 250 (of the
// reason shown, state.dlqReason, when one is).
async function showDeadLetters() {
  const entity = document.getElementById("dlq-entity").value;
  const tbody = document.querySelector("#dlq-table tbody");
  if (!entity) {
    fill(document.querySelector("#dlq-reasons tbody"), []);
    return fill(tbody, []);
  }
  if (state.dlqEntity !== entity) state.dlqReason = undefined; // a reason is the entity's
  state.dlqEntity = entity;
  const reasons = (await call("MessagingService", "ListDeadLetterReasons", { entity })).reasons || [];
  if (state.dlqReason !== undefined && !reasons.some((r) => (r.reason || "") === state.dlqReason)) state.dlqReason = undefined;
  fill(document.querySelector("#dlq-reasons tbody"), reasons.map((r) => {
    const reason = r.reason || "";
    const button = (action, text, fn) => {
      const b = el("button", { type: "button", "data-action": action }, text);
      b.addEventListener("click", fn);
      return b;
    };
    return el("tr", { "data-reason": reason, class: state.dlqReason === reason ? "chosen" : "" },
      el("td", {}, reasonLabel(reason)), num(r.count),
      el("td", {}, button("show", "Show", () => { state.dlqReason = state.dlqReason === reason ? undefined : reason; showDeadLetters(); }), " ",
        button("resubmit", "Resubmit all", () => reasonAction(entity, reason, int(r.count), true)), " ",
        button("purge", "Purge all", () => reasonAction(entity, reason, int(r.count), false))));
  }));
  const body = { entity, maxMessages: 250, subQueue: "SUB_QUEUE_DEAD_LETTER" };
  if (state.dlqReason !== undefined) body.filter = { deadLetterReason: state.dlqReason };
  document.getElementById("dlq-list-title").textContent = state.dlqReason === undefined
    ? "The oldest" : `The oldest dead-lettered for ${reasonLabel(state.dlqReason)}`;
  const msgs = (await call("MessagingService", "Peek", body)).messages || [];
  fill(tbody, msgs.map((m) => el("tr", { "data-seq": m.sequenceNumber },
    el("td", {}, el("input", { type: "checkbox", value: m.sequenceNumber })),
    num(m.sequenceNumber), el("td", {}, when(m.enqueuedTime)), el("td", {}, m.deadLetterReason || ""),
    el("td", {}, m.deadLetterDescription || ""), num(m.deliveryCount), el("td", { class: "body" }, preview(m.message && m.message.body)))));
}

// reasonSeqs finds the sequence numbers of an entity's dead letters of a
// reason, searched on the server a page at a time.
async function reasonSeqs(entity, reason) {
  const seqs = [];
  for (let from = 1; ;) {
    const res = await call("MessagingService", "Peek", { entity, subQueue: "SUB_QUEUE_DEAD_LETTER", maxMessages: 250,
      fromSequenceNumber: from, filter: { deadLetterReason: reason } });
    seqs.push(...(res.messages || []).map((m) => m.sequenceNumber));
    from = int(res.nextSequenceNumber);
    if (!from) return seqs;
  }
}

// reasonAction resubmits (or deletes) every dead letter of a reason,
// confirmed, in transactions of at most 1,000.
async function reasonAction(entity, reason, count, resubmitting) {
  const verb = resubmitting ? "Resubmit" : "Delete";
  if (!window.confirm(`${verb} every dead letter of ${entity} dead-lettered for ${reasonLabel(reason)} (${count})?`)) return;
  const progress = document.getElementById("dlq-progress");
  progress.textContent = resubmitting ? "resubmitting…" : "deleting…";
  let done = 0, said;
  try {
    const seqs = await reasonSeqs(entity, reason);
    for (let i = 0; i < seqs.length; i += 1000) {
      const batch = seqs.slice(i, i + 1000);
      if (resubmitting) {
        const steps = await stream("MessagingService", "ResubmitDeadLetters", { entity, sequenceNumbers: batch });
        done += int((steps[steps.length - 1] || {}).done);
      } else {
        done += int((await call("MessagingService", "PurgeDeadLetters", { entity, sequenceNumbers: batch })).purged);
      }
    }
    said = `${resubmitting ? "resubmitted" : "deleted"} ${done} dead letter(s) of ${reasonLabel(reason)}`;
  } catch (e) {
    said = `${verb.toLowerCase()} failed after ${done}: ${e.message}`;
  }
  state.entities = [];
  await refresh();
  progress.textContent = said; // once the view shows what it did
}

// preview shows a body as text when it is UTF-8, else as base64.
function preview(b64) {
  if (!b64) return "";
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  try {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    return text.length > 300 ? text.slice(0, 300) + "…" : text;
  } catch {
    return "base64:" + b64.slice(0, 300);
  }
}

async function resubmit(all) {
  const entity = document.getElementById("dlq-entity").value;
  const seqs = all ? [] : [...document.querySelectorAll("#dlq-table input:checked")].map((c) => c.value);
  if (!entity || (!all && !seqs.length)) return;
  if (!window.confirm(all ? `Resubmit every dead letter of ${entity}?` :
    `Resubmit dead letter(s) ${seqs.map((s) => "#" + s).join(", ")} of ${entity}?`)) return;
  const progress = document.getElementById("dlq-progress");
  progress.textContent = "resubmitting…";
  try {
    const steps = await stream("MessagingService", "ResubmitDeadLetters", { entity, sequenceNumbers: seqs });
    const last = steps[steps.length - 1] || {};
    progress.textContent = `resubmitted ${int(last.done)} of ${int(last.total)}`;
  } catch (e) {
    progress.textContent = "resubmit failed: " + e.message;
  }
  state.entities = [];
  await refresh();
}

// rateSeries are the throughput chart's lines: a sample's key, colour.
const rateSeries = [["sent", "#2d6cdf"], ["received", "#2f8a4c"], ["settled", "#b8860b"]];

// chart draws samples as lines on an SVG, each at its time on the time
// axis, against a value axis in unit, with a caption of the peak. A
// series is [key, colour], or [key, colour, label] (the line then
// carries its label, for a legend beside the chart). A sample without a
// series' key counts 0 there (the API's JSON leaves zeros out); one
// whose value is null leaves a gap. every says how often samples come,
// for the note on a chart with none.
function chart(samples, series = rateSeries, unit = "msg/s", caption = "", every = "every bucket") {
  const ns = "http://www.w3.org/2000/svg";
  const W = 800, H = 260, left = 56, right = 12, top = 24, bottom = 28;
  const w = W - left - right, h = H - top - bottom;
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  // What it draws, for a reader of the page: how many samples, from
  // and to when.
  svg.setAttribute("data-samples", samples.length);
  if (samples.length) {
    svg.setAttribute("data-from", samples[0].at);
    svg.setAttribute("data-to", samples[samples.length - 1].at);
  }
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
    return e;
  };
  const value = (s, key) => (s[key] === null ? null : Number(s[key] || 0));
  const peak = Math.max(0, ...samples.flatMap((s) => series.map(([key]) => value(s, key) || 0)));
  const scale = niceCeil(peak);
  add("text", { x: left, y: 14, "font-size": 12, class: "caption" },
    `peak ${+peak.toFixed(1)} ${unit} over ${samples.length} samples${caption ? ", " + caption : ""}`);
  // The value axis: 0, half and the scale's top, in unit.
  for (const f of [0, 0.5, 1]) {
    const y = top + h - f * h;
    add("line", { x1: left, x2: left + w, y1: y, y2: y, stroke: "#dde1ea" });
    add("text", { x: left - 6, y: y + 4, "font-size": 11, "text-anchor": "end", class: "rate-tick" }, `${+(scale * f).toFixed(1)}`);
  }
  add("text", { x: 12, y: top + h / 2, "font-size": 11, transform: `rotate(-90 12 ${top + h / 2})`, "text-anchor": "middle" }, unit);
  // The time axis: each sample at its time; the first, middle and last
  // samples' times as ticks.
  const times = samples.map((s) => Date.parse(s.at));
  const t0 = Math.min(...times), t1 = Math.max(...times);
  const x = (i) => left + (t1 > t0 ? (times[i] - t0) / (t1 - t0) : i / Math.max(1, samples.length - 1)) * w;
  if (samples.length) {
    for (const i of [0, Math.floor((samples.length - 1) / 2), samples.length - 1]) {
      add("text", { x: x(i), y: H - 8, "font-size": 11, "text-anchor": "middle", class: "time-tick" }, when(samples[i].at));
    }
  } else {
    add("text", { x: left + w / 2, y: top + h / 2, "font-size": 12, "text-anchor": "middle", class: "empty" },
      `no samples yet: the server takes one ${every}`);
  }
  for (const [key, color, label] of series) {
    const y = (v) => top + h - (v / scale) * h;
    const points = samples.map((s, i) => [i, value(s, key)]).filter(([, v]) => v !== null);
    const line = add("polyline", { points: points.map(([i, v]) => `${x(i)},${y(v)}`).join(" "), fill: "none", stroke: color,
      "stroke-width": 2, class: key });
    if (label !== undefined) line.setAttribute("data-label", label);
    if (points.length === 1) add("circle", { cx: x(points[0][0]), cy: y(points[0][1]), r: 3, fill: color }); // a line needs two
  }
  return svg;
}

// niceCeil rounds a rate up to 1, 2 or 5 times a power of ten (1 at
// least), so that the rate axis has round ticks.
function niceCeil(v) {
  if (v <= 1) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

async function refresh() {
  try {
    await views[state.view]();
    setStatus("updated " + new Date().toLocaleTimeString());
    document.getElementById("login").hidden = true;
  } catch (e) {
    if (e.code === "unauthenticated" || e.code === "permission_denied") document.getElementById("login").hidden = false;
    setStatus(e.message, true);
  }
}

// show shows a view and puts it in the URL, so that it can be linked
// (#streams, #entity/<path>): a new entry of the history for a click, the
// same entry rewritten when the URL itself led here (route).
function show(view, replace) {
  state.view = view;
  const hash = view === "entity" ? "entity/" + encodeURIComponent(state.entity) : view;
  if (location.hash.slice(1) !== hash) {
    if (replace) history.replaceState(null, "", "#" + hash);
    else history.pushState(null, "", "#" + hash);
  }
  for (const b of document.querySelectorAll("nav button")) b.classList.toggle("active", b.dataset.view === (view === "entity" ? "entities" : view));
  for (const s of document.querySelectorAll(".view")) s.hidden = s.id !== "view-" + view;
  refresh();
}

// route shows what the URL names.
function route() {
  const hash = location.hash.slice(1);
  if (hash.startsWith("entity/")) {
    let path = hash.slice("entity/".length);
    try {
      path = decodeURIComponent(path);
    } catch {
      // a stray "%": taken as it is
    }
    openEntity(path, true);
    return;
  }
  show(Object.hasOwn(views, hash) && hash !== "entity" ? hash : "entities", true);
}

document.addEventListener("DOMContentLoaded", () => {
  for (const b of document.querySelectorAll("nav button")) b.addEventListener("click", () => show(b.dataset.view));
  document.getElementById("login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    state.token = document.getElementById("token").value;
    sessionStorage.setItem("sluice-token", state.token);
    refresh();
  });
  document.getElementById("dlq-entity").addEventListener("change", showDeadLetters);
  document.getElementById("dlq-resubmit-selected").addEventListener("click", () => resubmit(false));
  document.getElementById("dlq-resubmit-all").addEventListener("click", () => resubmit(true));
  document.getElementById("reposition").addEventListener("submit", (ev) => { ev.preventDefault(); reposition(); });
  document.getElementById("entity-state").addEventListener("change", () => { state.browse = { from: 1, back: [], next: 0 }; browse(); });
  for (const id of ["entity-find", "entity-find-by", "entity-reason"]) {
    document.getElementById(id).addEventListener("change", () => { state.browse = { from: 1, back: [], next: 0 }; browse(); });
  }
  document.getElementById("entity-next").addEventListener("click", () => {
    state.browse.back.push(state.browse.from);
    state.browse.from = state.browse.next;
    browse();
  });
  document.getElementById("entity-prev").addEventListener("click", () => {
    state.browse.from = state.browse.back.pop() || 1;
    browse();
  });
  document.getElementById("entity-purge").addEventListener("click", () => entityAction(
    `Delete every dead letter of ${state.entity}?`, async () => {
      const res = await call("MessagingService", "PurgeDeadLetters", { entity: state.entity });
      return `purged ${int(res.purged)} dead letter(s)`;
    }));
  document.getElementById("entity-cancel").addEventListener("click", () => {
    const seqs = checkedSeqs();
    if (!seqs.length) return;
    entityAction(`Cancel scheduled message(s) ${seqs.map((s) => "#" + s).join(", ")} of ${state.entity}?`, async () => {
      await call("MessagingService", "CancelScheduled", { entity: state.entity, sequenceNumbers: seqs });
      return `cancelled ${seqs.length} scheduled message(s)`;
    });
  });
  document.getElementById("entity-resubmit").addEventListener("click", () => {
    const seqs = checkedSeqs();
    if (!seqs.length) return;
    entityAction(`Resubmit dead letter(s) ${seqs.map((s) => "#" + s).join(", ")} of ${state.entity}?`, async () => {
      const steps = await stream("MessagingService", "ResubmitDeadLetters", { entity: state.entity, sequenceNumbers: seqs });
      return `resubmitted ${int((steps[steps.length - 1] || {}).done)} dead letter(s)`;
    });
  });
  document.getElementById("entity-delete").addEventListener("click", () => {
    const seqs = checkedSeqs();
    if (!seqs.length) return;
    const named = seqs.map((s) => "#" + s).join(", ");
    if (document.getElementById("entity-state").value === "dead") {
      entityAction(`Delete dead letter(s) ${named} of ${state.entity}?`, async () => {
        const res = await call("MessagingService", "PurgeDeadLetters", { entity: state.entity, sequenceNumbers: seqs });
        return `deleted ${int(res.purged)} dead letter(s)`;
      });
      return;
    }
    entityAction(`Delete message(s) ${named} of ${state.entity}? A message a receiver holds locked stays.`, async () => {
      const res = await call("MessagingService", "DeleteMessages", { entity: state.entity, sequenceNumbers: seqs });
      const n = int(res.deleted);
      return `deleted ${n} of ${seqs.length} message(s)` + (n < seqs.length ? "; the others were locked, or gone" : "");
    });
  });
  document.getElementById("entity-purge-messages").addEventListener("click", () => entityAction(
    `Delete every message of ${state.entity} that no receiver holds locked? Dead letters stay.`, async () => {
      const res = await call("MessagingService", "PurgeMessages", { entity: state.entity });
      return `purged ${int(res.purged)} message(s)`;
    }));
  document.getElementById("parked-replay").addEventListener("click", replayParked);
  document.getElementById("lag-sub").addEventListener("change", (ev) => {
    state.lagSub = ev.target.value;
    drawSubscriptionLag().catch((e) => setStatus(e.message, true));
  });
  window.addEventListener("popstate", route);
  route();
  state.timer = setInterval(() => {
    if (state.view === "entity") refreshHistory();
    else if (state.view !== "deadletters") refresh();
  }, 5000);
});
