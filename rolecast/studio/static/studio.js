// rolecast studio: the little the pages do in the browser. No library; all text the server sends
// is already escaped HTML (rendered by its templates), and what this script writes itself goes
// through textContent.
"use strict";

function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.content : "";
}

// ---- one run: expand / collapse every model call
function setupCalls() {
  const all = (open) => document.querySelectorAll("details.call").forEach((d) => { d.open = open; });
  const expand = document.getElementById("expand-all");
  const collapse = document.getElementById("collapse-all");
  if (expand) expand.addEventListener("click", () => all(true));
  if (collapse) collapse.addEventListener("click", () => all(false));
}

// ---- the message graph: a node or an arrow shows its messages
function setupGraph() {
  const svg = document.getElementById("graph");
  const box = document.getElementById("graph-pick");
  if (!svg || !box) return;
  const title = document.getElementById("graph-pick-title");
  const body = document.getElementById("graph-pick-body");
  const pick = async (el) => {
    svg.querySelectorAll(".picked").forEach((p) => p.classList.remove("picked"));
    el.classList.add("picked");
    title.textContent = el.dataset.title;
    box.hidden = false;
    const seqs = el.dataset.seqs || "";
    if (!seqs) { body.textContent = "No messages."; return; }
    const response = await fetch(box.dataset.url + "?seq=" + encodeURIComponent(seqs));
    body.innerHTML = await response.text(); // the server's template, escaped
  };
  svg.querySelectorAll(".edge, .node").forEach((el) => {
    el.addEventListener("click", () => pick(el));
    el.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") pick(el); });
  });
  document.getElementById("graph-pick-close").addEventListener("click", () => {
    box.hidden = true;
    svg.querySelectorAll(".picked").forEach((p) => p.classList.remove("picked"));
  });
  // one round, or all: each arrow keeps the messages of that round, and hides when it has none
  const round = document.getElementById("graph-round");
  if (round) round.addEventListener("change", () => {
    const listed = new Map(); // a node's messages: those it sent (the hub: those sent to everyone)
    const add = (name, seqs) => listed.set(name, [...(listed.get(name) || []), ...seqs]);
    svg.querySelectorAll(".edge").forEach((edge) => {
      const seqs = round.value ? (JSON.parse(edge.dataset.rounds)[round.value] || []) : edge.dataset.all.split(",");
      edge.dataset.seqs = seqs.join(",");
      edge.classList.toggle("off", seqs.length === 0);
      edge.querySelector(".edge-label").textContent = String(seqs.length);
      add(edge.dataset.sender, seqs);
      if (edge.dataset.receiver === "everyone") add("everyone", seqs);
    });
    svg.querySelectorAll(".node").forEach((node) => {
      const seqs = [...new Set(listed.get(node.dataset.name) || [])].sort((a, b) => a - b);
      node.dataset.seqs = seqs.join(",");
      node.querySelector(".node-count").textContent = String(seqs.length);
    });
    box.hidden = true;
  });
}

// ---- a run in progress: its new events arrive over server-sent events
function setupLive() {
  const timeline = document.getElementById("timeline");
  if (!timeline || timeline.dataset.live !== "yes") return;
  const run = timeline.dataset.run;
  const source = new EventSource("/runs/" + encodeURIComponent(run) + "/live?after=" + timeline.dataset.last);
  source.addEventListener("events", (ev) => {
    const update = JSON.parse(ev.data);
    const holder = document.createElement("div");
    holder.innerHTML = update.html; // rendered and escaped by the server's templates
    holder.querySelectorAll(".turn, .mark").forEach((el) => el.classList.add("fresh"));
    while (holder.firstChild) timeline.appendChild(holder.firstChild);
    timeline.dataset.last = update.last;
    const set = (id, value) => { const el = document.getElementById(id); if (el) el.textContent = value; };
    set("run-events", update.events);
    set("run-calls", update.calls);
    set("run-tokens", Number(update.tokens).toLocaleString("en"));
    const status = document.getElementById("run-status");
    if (status) {
      status.textContent = update.status;
      status.className = "badge " + update.status.replace(/ /g, "-");
    }
    const over = !["running", "waiting for approval"].includes(update.status);
    refreshPanels(over);
    if (over) {
      const note = document.getElementById("live-note");
      if (note) note.textContent = "The run " + update.status + ".";
      source.close();
    }
  });
}

// the run's facts and side panels (totals, graph, steering) again from the server, at most every
// two seconds while the run goes on, and once more when it ends
let panelsDue = 0;
let panelsTimer = null;
function refreshPanels(now) {
  const run = async () => {
    panelsTimer = null;
    panelsDue = Date.now() + 2000;
    const response = await fetch(window.location.href, { cache: "no-store" });
    if (!response.ok) return;
    // an inert document (nothing in it runs); its text was escaped by the server's templates
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const selector of [".facts", ".side-col"]) {
      const mine = document.querySelector(selector);
      const theirs = fresh.querySelector(selector);
      if (mine && theirs) mine.replaceWith(document.adoptNode(theirs));
    }
    setupGraph();
  };
  if (panelsTimer) clearTimeout(panelsTimer);
  panelsTimer = setTimeout(run, now ? 0 : Math.max(0, panelsDue - Date.now()));
}

// ---- the runs list: refreshed every second (a run another process starts appears)
function setupRunsList() {
  const table = document.getElementById("runs-table");
  if (!table) return;
  const rows = document.getElementById("runs-rows");
  let last = rows.innerHTML;
  const picked = () => new Set([...rows.querySelectorAll(".pick-run:checked")].map((c) => c.value));
  const refresh = async () => {
    try {
      const response = await fetch(table.dataset.refresh, { cache: "no-store" });
      if (response.ok) {
        const html = await response.text();
        if (html !== last) {
          const keep = picked();
          rows.innerHTML = html; // the server's template, escaped
          last = html;
          rows.querySelectorAll(".pick-run").forEach((c) => { c.checked = keep.has(c.value); });
        }
      }
    } catch (e) { /* the server stopped: try again later */ }
    setTimeout(refresh, 1000);
  };
  setTimeout(refresh, 1000);
  // compare: the two ticked runs become ?a=&b=
  const form = document.getElementById("compare-form");
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const ids = [...picked()];
    if (ids.length !== 2) { alert("Tick exactly two runs to compare."); return; }
    window.location = "/compare?a=" + encodeURIComponent(ids[1]) + "&b=" + encodeURIComponent(ids[0]);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  setupCalls();
  setupGraph();
  setupLive();
  setupRunsList();
});
