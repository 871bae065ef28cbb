// The console page: the pending decisions, fetched again whenever the
// daemon's event stream says something changed.
import { block, inline } from "./text.js";
import { renderGrants } from "./grants.js";
import { el, when } from "./dom.js";
import { renderTimeline, renderStory } from "./journal.js";
import { renderAgents } from "./agents.js";
import { renderSources, renderProviders } from "./sources.js";

// The tab's page secret: the sign-in redirect brings it in the fragment
// (never sent to a server); it is moved into sessionStorage, which no
// other port and no other tab reads, and sent with every call. A cookie
// alone opens nothing: another port of this host receives it too.
const secret = pageSecret();
if (!secret) location.replace("/console/signin?tab=new");
let session = null; // the promise of GET /console/api/session: the CSRF token
const list = document.getElementById("pending-list");
const statusLine = document.getElementById("status");
const empty = document.getElementById("empty");
const count = document.getElementById("pending-count");
const notifyButton = document.getElementById("notify");
const windows = ["once", "1h", "1d", "7d"];
let seen = null; // ids shown so far; null before the first load

function pageSecret() {
  const m = /^#session=([A-Za-z0-9]+)$/.exec(location.hash);
  if (m) {
    sessionStorage.setItem("plexus-console", m[1]);
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("plexus-console");
}

function signedOut() {
  sessionStorage.removeItem("plexus-console");
  location.assign("/console/signin");
}

async function api(path, body) {
  const opts = { credentials: "same-origin", headers: { "X-Plexus-Console": secret } };
  if (body !== undefined) {
    session ||= api("session");
    opts.method = "POST";
    opts.headers["Content-Type"] = "application/json";
    opts.headers["X-Plexus-CSRF"] = (await session).csrf;
    opts.body = JSON.stringify(body);
  }
  const r = await fetch("/console/api/" + path, opts);
  const data = await r.json().catch(() => ({}));
  if (r.status === 401) signedOut();
  if (!r.ok) throw new Error((data.error && data.error.message) || r.statusText);
  return data;
}

function capabilities(d) {
  const fs = el("fieldset", { class: "caps" }, el("legend", {}, "What would run (untick to grant less)"));
  for (const c of d.capabilities) {
    const id = `${d.id}-cap-${c.id}`;
    const row = el("div", { class: "cap" },
      el("input", { type: "checkbox", id, checked: true, "data-cap": c.id }),
      el("label", { htmlFor: id }, el("code", {}, c.id)));
    const verbs = el("span", { class: "verbs", role: "group", "aria-label": `verbs of ${c.id}` });
    for (const v of c.verbs) {
      const vid = `${id}-${v}`;
      verbs.append(el("input", { type: "checkbox", id: vid, checked: true, "data-cap": c.id, "data-verb": v }),
        el("label", { htmlFor: vid }, v));
    }
    row.append(verbs, el("span", { class: "meta" }, `window ${c.window}`,
      c.provenance ? ` · ${c.provenance}` : "", c.sensitivity ? ` · ${c.sensitivity} sensitivity` : ""));
    fs.append(row);
  }
  return fs;
}

function sections(d) {
  const out = [];
  for (const s of d.sections) {
    const body = el("div");
    block(body, s.lines);
    if (s.agent) {
      out.push(el("aside", { class: "agent-words", "aria-label": "The agent's own words, not checked by Plexus" },
        el("h4", {}, "The agent says (its own words, not checked by Plexus)"), body));
    } else {
      out.push(el("section", { class: "narration" }, el("h4", {}, s.title), body));
    }
  }
  return out;
}

// definition shows a changed definition whole, before and now: the file
// cuts a long one, and approving serves all of it.
function definition(d) {
  if (!d.definition) return "";
  return el("details", { class: "definition" },
    el("summary", {}, "The whole definition, before and now (approving serves all of Now)"),
    el("p", {}, "Before:"), el("pre", {}, d.definition.old),
    el("p", {}, "Now:"), el("pre", {}, d.definition.new));
}

// narrowing reads the form: the capabilities and verbs the card showed and
// the owner left ticked, always in full, so that the approval is what the
// owner saw (the daemon refuses it when the file changed since).
function narrowing(card, d) {
  const body = {};
  const kept = [...card.querySelectorAll("input[data-cap]:not([data-verb])")].filter((i) => i.checked).map((i) => i.dataset.cap);
  if (d.capabilities.length > 0) body.keep = kept;
  for (const c of d.capabilities) {
    if (!kept.includes(c.id)) continue;
    const vs = [...card.querySelectorAll(`input[data-verb][data-cap="${CSS.escape(c.id)}"]`)].filter((i) => i.checked).map((i) => i.dataset.verb);
    (body.verbs ||= {})[c.id] = vs;
  }
  const w = card.querySelector("select.window");
  if (w && w.value) body.window = w.value;
  const reason = card.querySelector("textarea").value.trim();
  if (reason) body.reason = reason;
  return body;
}

async function decide(card, d, action) {
  const reason = card.querySelector("textarea").value.trim();
  const body = action === "approve" ? narrowing(card, d) : { reason };
  if (action === "deny" && !reason) {
    say(card, d.agent ? "Say why you deny: the agent is told." : "Say why you deny: it is kept in the journal.");
    card.querySelector("textarea").focus();
    return;
  }
  for (const b of card.querySelectorAll("button")) b.disabled = true;
  try {
    const r = await api(`pending/${encodeURIComponent(d.id)}/${action}`, body);
    statusLine.textContent = r.message;
    await load();
  } catch (e) {
    say(card, e.message);
    for (const b of card.querySelectorAll("button")) b.disabled = false;
  }
}

function say(card, msg) {
  card.querySelector(".outcome").textContent = msg;
}

function card(d) {
  const h = el("h3", { id: `${d.id}-title` });
  inline(h, d.title || d.id);
  const reasonId = `${d.id}-reason`;
  const windowId = `${d.id}-window`;
  // A changed definition or an extension is decided as a whole.
  const narrowable = d.capabilities.length > 0;
  const select = el("select", { id: windowId, class: "window" }, el("option", { value: "" }, "as asked"),
    ...windows.map((w) => el("option", { value: w }, w)));
  const c = el("article", { class: "decision", id: d.id, "aria-labelledby": `${d.id}-title` },
    h,
    el("p", { class: "meta" }, ...(d.agent ? [el("strong", {}, d.agent), " asks · "] : ["put up "]), when(d.created), " · expires ", when(d.expires),
      " · ", el("code", {}, d.file)),
    d.problem ? el("p", { class: "problem", role: "alert" }, d.problem) : "",
    d.sameUser ? el("p", { class: "warn" }, "This agent runs as your own user: it could move this file itself.") : "",
    ...sections(d),
    definition(d),
    narrowable ? capabilities(d) : "",
    el("div", { class: "decide" },
      ...(narrowable ? [el("label", { htmlFor: windowId }, "Window "), select] : []),
      el("label", { htmlFor: reasonId }, "Reason (required to deny)"),
      el("textarea", { id: reasonId, rows: 2 }),
      el("div", { class: "buttons" },
        el("button", { type: "button", class: "approve", onclick: () => decide(c, d, "approve") }, "Approve"),
        el("button", { type: "button", class: "deny", onclick: () => decide(c, d, "deny") }, "Deny")),
      el("p", { class: "outcome", role: "status", "aria-live": "polite" })));
  return c;
}

function announce(fresh) {
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  for (const d of fresh) new Notification(d.agent ? `Plexus: ${d.agent} asks` : "Plexus asks", { body: d.title, tag: d.id });
}

async function load() {
  let data;
  try {
    data = await api("pending");
  } catch (e) {
    statusLine.textContent = e.message;
    return;
  }
  const ids = new Set(data.pending.map((d) => d.id));
  for (const a of [...list.children]) if (!ids.has(a.id)) a.remove();
  const fresh = [];
  for (const d of data.pending) {
    const sum = JSON.stringify(d);
    const old = document.getElementById(d.id);
    if (old) {
      // The file changed (a problem written into it, say): show it anew,
      // unless the owner is in the middle of deciding it.
      if (old.dataset.sum !== sum && !old.contains(document.activeElement)) {
        const again = card(d);
        again.dataset.sum = sum;
        old.replaceWith(again);
      }
      continue;
    }
    const c = card(d);
    c.dataset.sum = sum;
    list.append(c);
    if (seen && !seen.has(d.id)) fresh.push(d);
  }
  seen = ids;
  const n = data.pending.length;
  count.textContent = n ? ` (${n})` : "";
  document.title = n ? `(${n}) Plexus console` : "Plexus console";
  empty.hidden = n > 0;
  announce(fresh);
}

async function loadGrants() {
  const status = document.getElementById("grants-status");
  let data;
  try {
    data = await api("grants");
  } catch (e) {
    status.textContent = e.message;
    return;
  }
  document.getElementById("grants-empty").hidden = data.grants.length > 0;
  renderGrants(document.getElementById("grants-list"), data.grants, async (g, button) => {
    try {
      await api("grants/revoke", { agentId: g.agentId, capabilityId: g.capabilityId });
      status.textContent = `Revoked ${g.agentId}'s grant on ${g.capabilityId}.`;
      await loadGrants();
    } catch (e) {
      status.textContent = e.message;
      button.disabled = false;
    }
  });
}

async function loadAgents() {
  const status = document.getElementById("agents-status");
  let data;
  try {
    data = await api("agents");
  } catch (e) {
    status.textContent = e.message;
    return;
  }
  status.textContent = data.agents.length ? status.textContent : "No agent is connected yet (plexus agents connect).";
  renderAgents(document.getElementById("agents-list"), data.agents, async (a, button) => {
    try {
      await api("agents/revoke", { agentId: a.agentId });
      status.textContent = `Revoked ${a.agentId}.`;
      await loadAgents();
    } catch (e) {
      status.textContent = e.message;
      button.disabled = false;
    }
  });
}

async function loadSources() {
  const status = document.getElementById("sources-status");
  try {
    const data = await api("sources");
    status.textContent = data.sources.length ? "" : "No source yet (plexus portal add, plexus mcp add).";
    renderSources(document.getElementById("sources-list"), data.sources);
    document.getElementById("providers-empty").hidden = data.providers.length > 0;
    renderProviders(document.getElementById("providers-list"), data.providers);
  } catch (e) {
    status.textContent = e.message;
  }
}

async function loadJournal() {
  const status = document.getElementById("journal-status");
  const form = new FormData(document.getElementById("journal-filter"));
  const q = new URLSearchParams();
  for (const [k, v] of form) if (v) q.set(k, v);
  try {
    const data = await api("journal?" + q);
    status.textContent = data.rows.length ? "" : "Nothing in the journal matches.";
    renderTimeline(document.getElementById("journal-list"), data.rows);
  } catch (e) {
    status.textContent = e.message;
  }
}

async function loadTrace(id) {
  document.getElementById("trace-id").textContent = id;
  const data = await api("journal?trace=" + encodeURIComponent(id));
  renderStory(document.getElementById("story"), data.rows);
}

// view is the view the address names: pending, grants, journal, trace.
function view() {
  const h = location.hash.slice(1);
  if (h.startsWith("trace/")) return "trace";
  return ["grants", "agents", "sources", "journal"].includes(h) ? h : "pending";
}

// show makes the view the address names the one shown.
function show() {
  const v = view();
  for (const s of document.querySelectorAll("main > section")) s.hidden = s.id !== v;
  for (const a of document.querySelectorAll("nav a[data-view]")) {
    if (a.dataset.view === v || (v === "trace" && a.dataset.view === "journal")) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  refresh();
}

// refresh fetches what the shown view needs again.
function refresh() {
  const v = view();
  if (v === "grants") loadGrants();
  if (v === "agents") loadAgents();
  if (v === "sources") loadSources();
  if (v === "journal") loadJournal();
  if (v === "trace") loadTrace(decodeURIComponent(location.hash.slice("#trace/".length))).catch((e) => { statusLine.textContent = e.message; });
}

function changed() {
  load();
  refresh();
}

// live reads the daemon's event stream (server-sent events, read with
// fetch so that it carries the page secret) and reconnects when it ends.
async function live() {
  for (;;) {
    try {
      const r = await fetch("/console/api/events", { credentials: "same-origin", headers: { "X-Plexus-Console": secret } });
      if (r.status === 401) return signedOut();
      if (!r.ok || !r.body) throw new Error(r.statusText);
      if (statusLine.textContent.startsWith("Reconnecting")) statusLine.textContent = "";
      await frames(r.body, (f) => { if (/^event: changed$/m.test(f)) changed(); });
    } catch {
      // the daemon went away, or the stream broke: try again below
    }
    statusLine.textContent = "Reconnecting to Plexus…";
    await new Promise((ok) => setTimeout(ok, 1000));
  }
}

// frames calls fn with each event-stream frame of body until it ends.
async function frames(body, fn) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value.replaceAll("\r\n", "\n");
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      fn(buf.slice(0, i));
      buf = buf.slice(i + 2);
    }
  }
}

document.getElementById("signout").addEventListener("click", async () => {
  try {
    await api("signout", {});
  } catch (e) {
    statusLine.textContent = e.message;
    return;
  }
  signedOut();
});

if ("Notification" in window && Notification.permission === "default") {
  notifyButton.hidden = false;
  notifyButton.addEventListener("click", async () => {
    await Notification.requestPermission();
    notifyButton.hidden = true;
  });
}
window.addEventListener("hashchange", show);
document.getElementById("journal-filter").addEventListener("submit", (ev) => {
  ev.preventDefault();
  loadJournal();
});
if (secret) {
  show();
  live();
}
