// podledger timeline: draws what the server computed (read/ui/timeline.py). Every string from the
// server is user data (pod names, messages): it is put in the page with textContent or as an
// attribute value, never parsed as markup.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const state = { view: null, uid: "", version: null, timer: null, ticket: 0, refreshing: false };

function $(id) { return document.getElementById(id); }

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const child of children) node.append(child instanceof Node ? child : String(child));
  return node;
}

function svg(tag, attrs, title) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (title) {
    const t = document.createElementNS(SVG, "title");
    t.textContent = title;
    node.append(t);
  }
  return node;
}

async function api(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function showError(error) {
  const box = $("error");
  box.hidden = !error;
  box.textContent = error ? String(error.message || error) : "";
}

function podLink(uid, version) {
  return "#/pod/" + encodeURIComponent(uid) + (version != null ? "/v/" + version : "");
}

// ------------------------------------------------------------------------------ sidebar

async function loadNamespaces() {
  const select = $("namespace");
  const chosen = select.value;
  const namespaces = await api("api/namespaces");
  select.replaceChildren(...namespaces.map((n) =>
    el("option", { value: n.namespace }, `${n.namespace} (${n.pods})`)));
  if (chosen && namespaces.some((n) => n.namespace === chosen)) select.value = chosen;
  namespaceChanged();
}

function namespaceChanged() {
  const ns = $("namespace").value;
  $("namespace-link").setAttribute("href", ns ? "#/ns/" + encodeURIComponent(ns) : "#/");
  return loadPods();
}

async function loadPods() {
  const params = new URLSearchParams({ namespace: $("namespace").value, q: $("search").value });
  const pods = await api("api/pods?" + params);
  $("pods").replaceChildren(...pods.map((p) => {
    const link = el("a", { href: podLink(p.uid), "data-uid": p.uid }, p.name, el("small", {}, `${p.node} · last ${p.last}`));
    if (p.uid === state.uid) link.classList.add("current");
    return el("li", {}, link);
  }));
}

// ------------------------------------------------------------------------------ the chart

function drawLegend(legend) {
  const items = [];
  for (const b of legend.phase) items.push(el("span", {}, el("span", { class: "swatch " + b.value }), "phase " + b.value));
  for (const b of legend.ready) items.push(el("span", {}, el("span", { class: "swatch " + b.value }), "Ready " + b.value));
  items.push(el("span", {}, el("span", { class: "swatch restart" }), "container restart"));
  $("legend").replaceChildren(...items);
}

function drawAxis(ticks) {
  const axis = svg("svg", { height: 22, class: "ticks" });
  for (const t of ticks) {
    axis.append(svg("line", { x1: t.x + "%", x2: t.x + "%", y1: 14, y2: 22 }));
    const label = svg("text", { x: t.x + "%", y: 11, "text-anchor": "middle", "data-ts": t.ts_ms });
    label.textContent = t.label;
    axis.append(label);
  }
  return el("div", { class: "axis" }, el("span", {}, "UTC"), axis);
}

function drawBands(parent, bands, kind, y, height, onClick) {
  for (const b of bands) {
    const title = `${kind} ${b.label}: v${b.first_version}` +
      (b.last_version !== b.first_version ? `–v${b.last_version}` : "") + (b.open ? " (latest)" : "");
    const rect = svg("rect", {
      class: "band " + kind, x: b.x + "%", width: Math.max(b.width, 0.05) + "%", y, height,
      fill: b.colour, "data-kind": kind, "data-value": b.value, "data-version": b.first_version,
    }, title);
    rect.addEventListener("click", () => onClick(b.first_version));
    parent.append(rect);
  }
}

function drawRestarts(parent, marks, top, bottom) {
  for (const m of marks) {
    const g = svg("g", { class: "restart", "data-container": m.container, "data-restarts": m.restarts }, m.label);
    g.append(svg("line", { class: "restart", x1: m.x + "%", x2: m.x + "%", y1: top, y2: bottom }));
    g.append(svg("circle", { class: "restart", cx: m.x + "%", cy: top, r: 3 }));
    parent.append(g);
  }
}

function laneLabel(lane, wide) {
  const link = el("a", { href: podLink(lane.uid) }, wide ? lane.name : `life from v${lane.first_version}`);
  return el("div", { class: "label", title: `${lane.namespace}/${lane.name} ${lane.uid}` }, link,
    el("br"), el("small", {}, wide ? lane.node : lane.uid));
}

function drawPodLane(lane) {
  const chart = svg("svg", { height: 58, class: "lane-chart" });
  const select = (version) => selectVersion(lane.uid, version);
  drawBands(chart, lane.phase, "phase", 4, 18, select);
  drawBands(chart, lane.ready, "ready", 26, 10, select);
  drawRestarts(chart, lane.restarts, 2, 38);
  for (const v of lane.versions) {
    const dot = svg("circle", {
      class: "version", cx: v.x + "%", cy: 48, r: 5, tabindex: 0, role: "button",
      "data-version": v.version, "data-uid": lane.uid,
    }, v.label);
    if (lane.uid === state.uid && v.version === state.version) dot.classList.add("selected");
    dot.addEventListener("click", () => select(v.version));
    dot.addEventListener("keydown", (e) => { if (e.key === "Enter") select(v.version); });
    chart.append(dot);
  }
  return el("div", { class: "lane", "data-uid": lane.uid }, laneLabel(lane, false), chart);
}

function drawNamespaceLane(lane) {
  const chart = svg("svg", { height: 28, class: "lane-chart" });
  const open = (version) => { location.hash = podLink(lane.uid, version); };
  drawBands(chart, lane.phase, "phase", 3, 12, open);
  drawBands(chart, lane.ready, "ready", 17, 7, open);
  drawRestarts(chart, lane.restarts, 1, 26);
  return el("div", { class: "lane", "data-uid": lane.uid }, laneLabel(lane, true), chart);
}

function drawTimeline(data, wide) {
  $("title").textContent = data.title;
  $("window").textContent = `${data.window.start} – ${data.window.end}` +
    (data.truncated ? " · the most recently seen pods only" : "");
  drawLegend(data.legend);
  const lanes = data.lanes.map(wide ? drawNamespaceLane : drawPodLane);
  $("chart").replaceChildren(drawAxis(data.ticks), ...lanes);
  const table = $("versions");
  table.hidden = wide;
  if (!wide) {
    const rows = data.lanes.flatMap((lane) => lane.versions.map((v) => {
      const tr = el("tr", { "data-version": v.version, "data-uid": lane.uid },
        el("td", {}, "v" + v.version), el("td", {}, v.time), el("td", {}, v.phase || "-"),
        el("td", {}, v.ready || "-"), el("td", {}, v.containers.join(" ")), el("td", {}, v.cause));
      if (lane.uid === state.uid && v.version === state.version) tr.classList.add("selected");
      tr.addEventListener("click", () => selectVersion(lane.uid, v.version));
      return tr;
    }));
    table.tBodies[0].replaceChildren(...rows);
  }
}

// ------------------------------------------------------------------------------ the detail pane

function inputsTable(rows) {
  if (!rows.length) return el("p", {}, "(none)");
  return el("table", {},
    el("thead", {}, el("tr", {}, el("th", {}, "time"), el("th", {}, "input"), el("th", {}, "event"), el("th", {}, "effect"))),
    el("tbody", {}, ...rows.map((r) => el("tr", {}, el("td", {}, r.time), el("td", {}, r.input),
      el("td", {}, r.event), el("td", {}, r.effect)))));
}

function list(items, empty) {
  return items.length ? el("ul", {}, ...items.map((i) => el("li", {}, i))) : el("p", {}, empty);
}

function drawDetail(d) {
  const nav = el("div", { class: "nav" });
  if (d.previous_version != null) nav.append(el("a", { href: podLink(d.uid, d.previous_version), class: "previous" }, `← v${d.previous_version}`));
  if (d.next_version != null) nav.append(el("a", { href: podLink(d.uid, d.next_version), class: "next" }, `v${d.next_version} →`));
  const facts = el("dl", {});
  for (const [k, v] of [["time", d.time], ["phase", d.phase], ["ready", d.ready],
    ["containers", d.containers.join(" ") || "-"], ["caused by", d.cause], ["node", d.node], ["uid", d.uid]]) {
    facts.append(el("dt", {}, k), el("dd", { "data-field": k }, v));
  }
  const status = el("pre", {});
  status.textContent = JSON.stringify(d.status, null, 2);
  $("detail").replaceChildren(
    el("h3", {}, `${d.namespace}/${d.name} version ${d.version}`), nav, facts,
    el("h4", {}, d.changes_title), list(d.changes, "(none in kubelet-owned fields)"),
    el("h4", {}, "inputs applied since the previous version"), inputsTable(d.chain),
    el("h4", {}, "rules that decided it"), list(d.rules, "(no rule beyond the status generation itself)"),
    el("h4", {}, "inputs after it that changed nothing"), inputsTable(d.unchanged_after),
    ...d.notes.map((n) => el("p", { class: "note" }, n)),
    el("details", {}, el("summary", {}, "full status"), status));
  $("detail").setAttribute("data-version", d.version);
  $("detail").hidden = false;
}

function hideDetail() {
  const detail = $("detail");
  detail.hidden = true;
  detail.removeAttribute("data-version");
  detail.replaceChildren();
}

function selectVersion(uid, version) {
  const target = podLink(uid, version);
  if (location.hash !== target) location.hash = target;  // the route loads it
  else showVersion(uid, version);
}

async function showVersion(uid, version) {
  state.version = version;
  for (const node of document.querySelectorAll(".selected")) node.classList.remove("selected");
  for (const node of document.querySelectorAll(`[data-uid="${CSS.escape(uid)}"][data-version="${version}"]`)) {
    if (node.matches("circle.version, tr")) node.classList.add("selected");
  }
  const ticket = ++state.ticket;  // of several clicks in flight, the last one's answer is drawn
  const detail = await api("api/version?" + new URLSearchParams({ uid, version }));
  if (ticket === state.ticket) drawDetail(detail);
}

// ------------------------------------------------------------------------------ routes

async function followNamespace(namespace) {
  // The sidebar lists the namespace of the pod shown.
  const select = $("namespace");
  if (select.value !== namespace && [...select.options].some((o) => o.value === namespace)) {
    select.value = namespace;
    await namespaceChanged();
  }
}

async function route() {
  showError(null);
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  try {
    if (parts[0] === "pod" && parts[1]) {
      const changed = state.view !== "pod" || state.uid !== parts[1];
      state.view = "pod";
      state.uid = parts[1];
      const version = parts[2] === "v" ? Number(parts[3]) : null;
      if (changed) {
        hideDetail();
        state.version = null;
        const data = await api("api/pod?" + new URLSearchParams({ uid: state.uid }));
        drawTimeline(data, false);
        await followNamespace(data.lanes[0].namespace);
      }
      if (version != null) await showVersion(state.uid, version);
    } else if (parts[0] === "named" && parts[2]) {
      state.view = "named";
      drawTimeline(await api("api/pod?" + new URLSearchParams({ pod: parts[1] + "/" + parts[2] })), false);
      await followNamespace(parts[1]);
    } else if (parts[0] === "ns" && parts[1]) {
      state.view = "ns";
      state.uid = "";
      hideDetail();
      drawTimeline(await api("api/namespace?" + new URLSearchParams({ namespace: parts[1] })), true);
      await followNamespace(parts[1]);
    }
  } catch (error) {
    showError(error);
  }
  for (const link of document.querySelectorAll("#pods a")) {
    link.classList.toggle("current", link.getAttribute("data-uid") === state.uid);
  }
  document.body.setAttribute("data-ready", "true");  // the route has been drawn (tests wait on this)
}

async function refresh() {
  if (state.view === null || state.refreshing) return;  // a large view may take longer than 5 s
  state.refreshing = true;
  state.view = "stale";  // the route draws its view again, and the version the address names
  try {
    await route();
  } finally {
    state.refreshing = false;
  }
}

async function start() {
  $("namespace").addEventListener("change", () => namespaceChanged().catch(showError));
  let typing = null;
  $("search").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => loadPods().catch(showError), 200);
  });
  $("follow").addEventListener("change", (e) => {
    clearInterval(state.timer);
    state.timer = e.target.checked ? setInterval(() => { refresh(); loadPods().catch(showError); }, 5000) : null;
  });
  window.addEventListener("hashchange", route);
  try {
    const info = await api("api/info");
    $("info").textContent = `index ${info.index} · refresh: ${info.refresh}`;
    await loadNamespaces();
  } catch (error) {
    showError(error);
  }
  await route();
}

start();
