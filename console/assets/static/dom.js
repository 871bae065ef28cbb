// Building the page from data: every value becomes a property or a text
// node, never HTML.

// el makes a tag with props (class, properties, else attributes) and children.
export function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") e.className = v;
    else if (k in e) e[k] = v;
    else e.setAttribute(k, v);
  }
  e.append(...children);
  return e;
}

// when shows time t in the owner's locale, with the exact UTC time as title.
export function when(t) {
  const d = new Date(t);
  return el("time", { dateTime: d.toISOString(), title: d.toISOString() }, d.toLocaleString());
}
