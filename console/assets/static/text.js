// The decision file's markdown lines, shown as text: lists, quotes,
// paragraphs, `code` and **bold**, with the file's backslash escapes
// undone. Every piece becomes a text node: nothing from a file is ever
// parsed as HTML.

// inline appends line's text to el, with code spans and bold.
export function inline(el, line) {
  let strong = null;
  let buf = "";
  const target = () => strong || el;
  const flush = () => {
    if (buf) target().append(buf);
    buf = "";
  };
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (ch === "\\" && i + 1 < line.length) {
      buf += line[++i];
    } else if (ch === "`") {
      let n = 1;
      while (line[i + n] === "`") n++;
      const fence = "`".repeat(n);
      const end = line.indexOf(fence, i + n);
      if (end < 0) {
        buf += fence;
        i += n - 1;
        continue;
      }
      flush();
      let body = line.slice(i + n, end);
      if (n > 1 && body.startsWith(" ") && body.endsWith(" ") && body.length > 1) body = body.slice(1, -1);
      const code = document.createElement("code");
      code.textContent = body;
      target().append(code);
      i = end + n - 1;
    } else if (ch === "*" && line[i + 1] === "*") {
      flush();
      if (strong) {
        el.append(strong);
        strong = null;
      } else {
        strong = document.createElement("strong");
      }
      i++;
    } else {
      buf += ch;
    }
  }
  flush();
  if (strong) el.append(strong);
}

// block renders lines into el: "- " items (indented ones nested), "> "
// quotes, "### " headings, fenced code (a changed definition's JSON) and
// paragraphs split by blank lines.
export function block(el, lines) {
  let list = null;
  let sub = null;
  let quote = null;
  let para = null;
  let fence = null; // the open fence: its backticks, its code element, lines in it
  const end = () => { list = sub = quote = para = null; };
  for (const line of lines) {
    if (fence) {
      if (line.trim() === fence.marks) fence = null;
      else fence.code.append((fence.lines++ ? "\n" : "") + line);
      continue;
    }
    const open = line.match(/^(`{3,})[\w-]*\s*$/);
    if (open) {
      end();
      const code = document.createElement("code");
      const pre = document.createElement("pre");
      pre.append(code);
      el.append(pre);
      fence = { marks: open[1], code, lines: 0 };
      continue;
    }
    if (line.startsWith("### ")) {
      end();
      const h = document.createElement("h5");
      inline(h, line.slice(4));
      el.append(h);
      continue;
    }
    if (line.trim() === "") {
      if (!quote) end();
      para = null;
      continue;
    }
    const nested = line.match(/^\s+- (.*)$/);
    const item = line.match(/^- (.*)$/);
    if (item) {
      if (!list) { list = document.createElement("ul"); el.append(list); }
      const li = document.createElement("li");
      inline(li, item[1]);
      list.append(li);
      sub = null;
    } else if (nested && list) {
      if (!sub) { sub = document.createElement("ul"); list.lastElementChild.append(sub); }
      const li = document.createElement("li");
      inline(li, nested[1]);
      sub.append(li);
    } else if (line.startsWith(">")) {
      if (!quote) { quote = document.createElement("blockquote"); el.append(quote); para = null; }
      const text = line.replace(/^>\s?/, "");
      if (text === "") { para = null; continue; }
      if (!para) { para = document.createElement("p"); quote.append(para); } else { para.append(" "); }
      inline(para, text);
    } else if (list && line.startsWith("  ")) {
      inline(list.lastElementChild, " " + line.trim());
    } else {
      list = sub = quote = null;
      if (!para) { para = document.createElement("p"); el.append(para); } else { para.append(" "); }
      inline(para, line);
    }
  }
}
