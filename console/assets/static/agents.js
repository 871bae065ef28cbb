// The Agents view: every agent, its last day, and revoke.
import { el, when } from "./dom.js";

// renderAgents shows agents in list; revoke(a, button) is called when the
// owner revokes a.
export function renderAgents(list, agents, revoke) {
  const head = el("tr", {}, ...["Agent", "Client", "Enrolled", "Last seen", "Calls (24h)", "Refused", "Rate-limited", ""]
    .map((h) => el("th", { scope: "col" }, h)));
  const rows = agents.map((a) => {
    let action;
    if (a.revokedAt) {
      action = el("span", { class: "meta" }, "revoked ", when(a.revokedAt));
    } else {
      action = el("button", { type: "button", class: "deny", "aria-label": `Revoke agent ${a.agentId}` }, "Revoke");
      action.addEventListener("click", () => { action.disabled = true; revoke(a, action); });
    }
    return el("tr", { "data-agent": a.agentId, class: a.revokedAt ? "revoked" : "" },
      el("th", { scope: "row" }, el("strong", {}, a.agentId), a.label ? el("div", { class: "meta" }, a.label) : ""),
      el("td", {}, a.client || "—"),
      el("td", {}, a.enrolledAt ? when(a.enrolledAt) : "not yet"),
      el("td", {}, a.lastSeen ? when(a.lastSeen) : "never"),
      el("td", {}, String(a.calls)), el("td", {}, String(a.refused)), el("td", {}, String(a.rateLimited)),
      el("td", {}, action));
  });
  list.replaceChildren(el("table", { class: "grants agents" }, el("thead", {}, head), el("tbody", {}, ...rows)));
}
