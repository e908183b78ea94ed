// Building the page without HTML strings: every text goes through textContent, so nothing an
// agent wrote (a description, a reasoning, a customer's name) can become markup. The page's
// Content-Security-Policy refuses innerHTML outright (Trusted Types), so this is the only way.

/** Creates an element: h("a", {href: "#/x", class: "btn", onclick: fn}, "text", child…). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "class") {
      el.className = value;
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else if (value === true) {
      el.setAttribute(name, "");
    } else {
      el.setAttribute(name, String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Appends children (nodes or text; null, undefined and false are skipped). */
export function add(el, ...children) {
  append(el, children);
  return el;
}

/** Replaces an element's children. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** Tells assistive technology about a change that has no focus of its own. */
export function announce(message) {
  const status = document.getElementById("status");
  status.textContent = "";
  // A fresh text node after a tick is announced even when the message repeats.
  setTimeout(() => {
    status.textContent = message;
  }, 50);
}

/** A notice box: kind is "info", "ok", "warn" or "error". */
export function notice(kind, ...children) {
  return h(
    "div",
    { class: `notice notice-${kind}`, role: kind === "error" || kind === "warn" ? "alert" : null },
    ...children,
  );
}

/** A button that copies text, with a fallback that selects it where the clipboard API is not
 * available (a plain-http origin other than localhost). */
export function copyButton(text, label, target) {
  const button = h("button", { type: "button", class: "btn btn-small" }, label);
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = "Copied";
      announce("Copied to the clipboard.");
    } catch {
      if (target) {
        const range = document.createRange();
        range.selectNodeContents(target);
        const selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
      }
      button.textContent = "Selected: press Ctrl+C";
    }
    setTimeout(() => {
      button.textContent = label;
    }, 2500);
  });
  return button;
}

/** A labelled form field; returns {field, input}. */
export function field(label, input, hint) {
  const id = input.id || `f-${Math.random().toString(36).slice(2, 10)}`;
  input.id = id;
  const hintEl = hint ? h("p", { class: "hint", id: `${id}-hint` }, hint) : null;
  if (hintEl) input.setAttribute("aria-describedby", hintEl.id);
  const error = h("p", { class: "field-error", id: `${id}-error`, hidden: true });
  const wrapper = h("div", { class: "field" }, h("label", { for: id }, label), hintEl, input, error);
  return {
    field: wrapper,
    input,
    setError(message) {
      error.textContent = message || "";
      error.hidden = !message;
      if (message) {
        input.setAttribute("aria-invalid", "true");
        input.setAttribute(
          "aria-describedby",
          [hintEl && hintEl.id, error.id].filter(Boolean).join(" "),
        );
      } else {
        input.removeAttribute("aria-invalid");
        if (hintEl) input.setAttribute("aria-describedby", hintEl.id);
        else input.removeAttribute("aria-describedby");
      }
    },
  };
}

/** A table with a caption, header cells and rows of cells; a cell is a node, text, or
 * {value, class}. Wrapped so that a narrow screen scrolls the table, not the page. */
export function table(caption, headers, rows, options = {}) {
  const head = h(
    "tr",
    {},
    headers.map((header) => {
      const spec = typeof header === "string" ? { label: header } : header;
      return h("th", { scope: "col", class: spec.class }, spec.label);
    }),
  );
  const body = rows.map((row) =>
    h(
      "tr",
      { class: row.class, dataset: row.dataset },
      row.cells.map((cell, i) => {
        const spec = headers[i] && typeof headers[i] === "object" ? headers[i] : {};
        const isObject = cell && typeof cell === "object" && !(cell instanceof Node) && !Array.isArray(cell);
        const content = isObject ? cell.value : cell;
        const cls = [spec.class, isObject ? cell.class : null].filter(Boolean).join(" ");
        const tag = i === 0 && options.rowHeader ? "th" : "td";
        return h(tag, { class: cls || null, scope: tag === "th" ? "row" : null, "data-label": spec.label || null }, content);
      }),
    ),
  );
  return h(
    "div",
    { class: `table-wrap ${options.class || ""}` },
    h(
      "table",
      {},
      h("caption", { class: options.captionHidden ? "visually-hidden" : null }, caption),
      h("thead", {}, head),
      h("tbody", {}, body),
      options.foot ? h("tfoot", {}, options.foot) : null,
    ),
  );
}

/** A row of filter links (the inbox's state tabs): items are [value, label, hash]; the
 * current one is marked for assistive technology and drawn filled. */
export function filterNav(label, items, current) {
  return h(
    "nav",
    { class: "filters", "aria-label": label },
    h(
      "ul",
      {},
      items.map(([value, text, hash]) =>
        h("li", {}, h("a", { href: hash, "aria-current": value === current ? "page" : null }, text)),
      ),
    ),
  );
}

/** "First page" and "Next page" links for a list paged with the API's next_cursor; `base` is
 * the page's hash without a cursor. */
export function pager(base, cursor, nextCursor) {
  const sep = base.includes("?") ? "&" : "?";
  return h(
    "nav",
    { class: "pager", "aria-label": "Pages" },
    cursor ? h("a", { href: base, class: "btn btn-small" }, "First page") : null,
    nextCursor
      ? h("a", { href: `${base}${sep}cursor=${encodeURIComponent(nextCursor)}`, class: "btn btn-small", rel: "next" }, "Next page")
      : null,
  );
}

/** A definition list of facts: pairs of [term, value]; a pair whose value is null or
 * undefined is left out. */
export function facts(pairs, attrs = {}) {
  return h(
    "dl",
    { class: "facts", ...attrs },
    pairs
      .filter(([, value]) => value !== null && value !== undefined)
      .map(([term, value, ddAttrs]) => [h("dt", {}, term), h("dd", ddAttrs || {}, value)]),
  );
}
