// Orrery dashboard: the operations filter, and the live command page fed
// by the command's event stream (server-sent events; no polling). Every
// value goes into the page as text (textContent), never as HTML.
"use strict";

const TERMINAL = new Set(["succeeded", "failed", "dependency_failed", "canceled"]);

function statusClass(s) {
  switch (s) {
    case "succeeded": case "completed": return "st-ok";
    case "failed": case "error": return "st-failed";
    case "dependency_failed": return "st-depfailed";
    case "canceled": return "st-canceled";
    case "waiting_for_rate_limit": return "st-waiting";
    case "running": case "in_progress": case "started": case "attempt": case "retrying": return "st-running";
    default: return "st-pending";
  }
}

function duration(ms) {
  if (ms < 1000) return ms + "ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + "s";
  if (ms < 3600000) return Math.floor(ms / 60000) + "m" + String(Math.floor(ms / 1000) % 60).padStart(2, "0") + "s";
  return Math.floor(ms / 3600000) + "h" + String(Math.floor(ms / 60000) % 60).padStart(2, "0") + "m";
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function setupFilter() {
  const input = document.getElementById("filter");
  const table = document.getElementById("ops");
  if (!input || !table) return;
  const apply = () => {
    const q = input.value.trim().toLowerCase();
    for (const row of table.tBodies[0].rows) {
      row.hidden = q !== "" && !row.textContent.toLowerCase().includes(q);
    }
  };
  input.addEventListener("input", apply);
  table.addEventListener("orrery:rows", apply);
}

function setupLive() {
  const section = document.getElementById("command");
  if (!section || !section.dataset.events || !window.EventSource) return;
  const table = document.getElementById("ops");
  const body = table.tBodies[0];
  const rows = new Map();
  for (const row of body.rows) rows.set(row.dataset.label, row);
  let planned = 0;
  let pending = false;

  function badge(cell, status) {
    cell.replaceChildren(el("span", "badge " + statusClass(status), status));
  }

  function rowFor(ev) {
    let row = rows.get(ev.label);
    if (row) return row;
    row = document.createElement("tr");
    row.id = "op-" + ev.label;
    row.dataset.label = ev.label;
    const label = el("td");
    label.appendChild(el("code", "", ev.label));
    row.append(label, el("td", "", ev.operation), el("td", "state"), el("td", "attempts", "0"),
      el("td", "duration"), el("td", "error"));
    body.appendChild(row);
    rows.set(ev.label, row);
    table.dispatchEvent(new Event("orrery:rows"));
    return row;
  }

  function recount() {
    pending = false;
    const n = { succeeded: 0, failed: 0, dependency_failed: 0, canceled: 0, running: 0 };
    for (const row of rows.values()) {
      const s = row.dataset.status;
      n[TERMINAL.has(s) ? s : "running"] += 1;
    }
    const total = Math.max(planned, rows.size);
    const done = total - n.running - (planned > rows.size ? planned - rows.size : 0);
    for (const [name, count] of Object.entries(n)) {
      const c = document.querySelector('[data-count="' + name + '"]');
      if (c) c.textContent = String(count);
    }
    document.getElementById("done").textContent = String(done);
    document.getElementById("total").textContent = String(total);
    const bar = document.getElementById("progress");
    bar.max = Math.max(total, 1);
    bar.value = done;
    bar.textContent = done + " of " + total;
  }

  function later() {
    if (!pending) {
      pending = true;
      requestAnimationFrame(recount);
    }
  }

  function operation(ev) {
    const row = rowFor(ev);
    const status = TERMINAL.has(ev.status) ? ev.status
      : ev.status === "waiting_for_rate_limit" ? "waiting_for_rate_limit" : "running";
    row.dataset.status = status;
    badge(row.querySelector(".state"), ev.status === "started" ? "running" : ev.status);
    if (ev.attempt) row.querySelector(".attempts").textContent = String(ev.attempt);
    if (ev.elapsed_ms !== undefined) row.querySelector(".duration").textContent = duration(ev.elapsed_ms);
    if (ev.code || ev.message) {
      const details = el("details");
      details.append(el("summary", "", ev.code || "error"), el("pre", "", ev.message || ""));
      row.querySelector(".error").replaceChildren(details);
    }
    later();
  }

  const source = new EventSource(section.dataset.events);
  source.onmessage = (m) => {
    let ev;
    try { ev = JSON.parse(m.data); } catch (_) { return; }
    if (ev.type === "planned") {
      planned = ev.operations;
      later();
    } else if (ev.type === "operation") {
      operation(ev);
    } else if (ev.type === "finished") {
      const outcome = document.getElementById("outcome");
      outcome.className = "badge " + statusClass(ev.status);
      outcome.textContent = ev.status;
      const cancel = document.getElementById("cancel");
      if (cancel) cancel.remove();
      source.close();
      later();
    }
  };
  source.addEventListener("gap", () => {
    document.getElementById("outcome").after(el("span", "note", " (some events were missed: reload for every operation's state)"));
  });
}

document.addEventListener("DOMContentLoaded", () => {
  setupFilter();
  setupLive();
});
