// The Sources view: each source with its health and held entries.
import { el, when } from "./dom.js";

export function renderSources(list, sources) {
  const head = el("tr", {}, ...["Source", "Provenance", "Entries", "Health", "Held for your decision", "Restarts"]
    .map((h) => el("th", { scope: "col" }, h)));
  const rows = sources.map((s) => {
    const h = s.health || {};
    const held = (s.held || []).length
      ? el("a", { href: "#pending" }, ...s.held.flatMap((id, i) => [i ? ", " : "", el("code", {}, id)]))
      : "—";
    return el("tr", { "data-source": s.id, class: h.status === "ok" || !h.status || h.status === "unknown" ? "" : "bad" },
      el("th", { scope: "row" }, el("code", {}, s.id)),
      el("td", {}, s.provenance || ""),
      el("td", {}, String(s.entries)),
      el("td", {}, el("span", { class: `health ${h.status || ""}` }, h.status || "unknown"),
        h.detail ? el("div", { class: "meta" }, h.detail) : "",
        h.checkedAt ? el("div", { class: "meta" }, "checked ", when(h.checkedAt)) : ""),
      el("td", {}, held),
      el("td", { "data-restarts": String(h.restarts || 0) }, String(h.restarts || 0)));
  });
  list.replaceChildren(el("table", { class: "grants sources" }, el("thead", {}, head), el("tbody", {}, ...rows)));
}

// renderProviders shows each ipc tool provider's process: its state, its
// restarts and how the last one ended.
export function renderProviders(list, providers) {
  const head = el("tr", {}, ...["Provider", "State", "Restarts", "Last exit", "Tools", "Health"]
    .map((h) => el("th", { scope: "col" }, h)));
  const rows = providers.map((p) => {
    const h = p.health || {};
    return el("tr", { "data-provider": p.id, "data-state": p.state, "data-restarts": String(p.restarts) },
      el("th", { scope: "row" }, el("code", {}, p.id), el("div", { class: "meta" }, p.command)),
      el("td", {}, p.state, p.since ? el("div", { class: "meta" }, "since ", when(p.since)) : ""),
      el("td", {}, String(p.restarts)),
      el("td", {}, p.lastExit || "—"),
      el("td", {}, String((p.tools || []).length)),
      el("td", {}, el("span", { class: `health ${h.status || ""}` }, h.status || "unknown")));
  });
  list.replaceChildren(el("table", { class: "grants providers", "aria-labelledby": "providers-h" },
    el("thead", {}, head), el("tbody", {}, ...rows)));
}
