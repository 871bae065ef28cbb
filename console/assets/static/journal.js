// The Journal view (a filterable timeline) and one trace told as a story:
// request, decision, tokens, calls, each with its outcome.
import { el, when } from "./dom.js";

const good = new Set(["grant.approved", "token.minted", "token.refreshed", "invoke.ok", "definition.approved", "extension.approved", "agent.enrolled"]);
const bad = new Set(["grant.denied", "grant.revoked", "token.revoked", "invoke.failed", "invoke.denied", "auth.failed", "definition.denied"]);

function outcome(type) {
  if (good.has(type)) return "ok";
  if (bad.has(type)) return "bad";
  return "";
}

// sentence tells one row in words, from its type and payload.
export function sentence(r) {
  const p = r.payload || {};
  const who = p.decidedBy ? ` by ${p.decidedBy}` : "";
  const via = p.via ? ` via ${p.via}` : "";
  const target = r.target || "";
  switch (r.type) {
    case "grant.requested": {
      const caps = Array.isArray(p.capabilities) && p.capabilities.length ? p.capabilities.join(", ") : "capabilities";
      return `${r.agentId || "an agent"} asked for ${caps}${target ? ` (${target})` : ""}`;
    }
    case "inbox.moved": return `the decision file moved from ${p.from || "?"}/ to ${p.to || "?"}/${p.why ? `: ${p.why}` : ""}`;
    case "grant.approved": return `approved${who}${via}`;
    case "grant.denied": return `denied${who}${via}${p.reason ? `: ${p.reason}` : ""}`;
    case "grant.revoked": return `grant on ${target} revoked${via}${p.reason ? `: ${p.reason}` : ""}`;
    case "token.minted": return `token minted${target ? ` (${target})` : ""}`;
    case "token.revoked": return `token revoked${via}`;
    case "invoke.started": return `call to ${target} started`;
    case "invoke.ok": return `call to ${target} succeeded`;
    case "invoke.failed": return `call to ${target} failed${p.errorCode ? `: ${p.errorCode}` : ""}`;
    case "invoke.denied": return `call to ${target} refused${p.errorCode ? `: ${p.errorCode}` : ""}`;
    default: return `${r.type}${target ? ` ${target}` : ""}`;
  }
}

function traceLink(id) {
  return id ? el("a", { href: `#trace/${encodeURIComponent(id)}` }, id.slice(0, 10) + "…") : "";
}

// renderTimeline shows rows newest first.
export function renderTimeline(list, rows) {
  const head = el("tr", {}, ...["Time", "What", "Agent", "Type", "Trace"].map((h) => el("th", { scope: "col" }, h)));
  const body = [...rows].reverse().map((r) =>
    el("tr", { class: outcome(r.type), "data-type": r.type },
      el("td", {}, when(r.ts)), el("td", {}, sentence(r)), el("td", {}, r.agentId || r.actor),
      el("td", {}, el("code", {}, r.type)), el("td", {}, traceLink(r.traceId))));
  list.replaceChildren(el("table", { class: "journal" }, el("thead", {}, head), el("tbody", {}, ...body)));
}

// renderStory shows one trace's rows, oldest first, as numbered steps.
export function renderStory(ol, rows) {
  ol.replaceChildren(...rows.map((r) =>
    el("li", { class: `step ${outcome(r.type)}`, "data-type": r.type },
      el("strong", {}, sentence(r)), " ", el("span", { class: "meta" }, when(r.ts), " · ", el("code", {}, r.type)))));
}
