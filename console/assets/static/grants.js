// The Grants view: the standing grants by agent, each revocable.
import { el, when } from "./dom.js";

// renderGrants shows grants in list, one table per agent; revoke(g) is
// called when the owner revokes g.
export function renderGrants(list, grants, revoke) {
  const byAgent = new Map();
  for (const g of grants) {
    if (!byAgent.has(g.agentId)) byAgent.set(g.agentId, []);
    byAgent.get(g.agentId).push(g);
  }
  const out = [];
  for (const [agent, gs] of [...byAgent].sort((a, b) => a[0].localeCompare(b[0]))) {
    const caption = el("caption", {}, el("strong", {}, agent), ` · ${gs.length} grant${gs.length === 1 ? "" : "s"}`);
    const head = el("tr", {}, ...["Capability", "Verbs", "Window", "Expires", ""].map((h) => el("th", { scope: "col" }, h)));
    const rows = gs.map((g) => {
      const name = `${agent}: ${g.capabilityId}`;
      const b = el("button", { type: "button", class: "deny", "aria-label": `Revoke ${name}` }, "Revoke");
      b.addEventListener("click", () => { b.disabled = true; revoke(g, b); });
      return el("tr", { "data-grant": `${agent} ${g.capabilityId}` },
        el("th", { scope: "row" }, el("code", {}, g.capabilityId), g.synthesizedFor ? ` (for ${g.synthesizedFor})` : ""),
        el("td", {}, (g.verbs || []).join(", ")),
        el("td", {}, g.trustWindow ? g.trustWindow.kind : ""),
        el("td", {}, when(g.expiresAt)),
        el("td", {}, b));
    });
    out.push(el("table", { class: "grants" }, caption, el("thead", {}, head), el("tbody", {}, ...rows)));
  }
  list.replaceChildren(...out);
}
