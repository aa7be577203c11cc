// Builds DOM nodes; user-controlled text is always set with textContent, never innerHTML.

/**
 * Returns a new element. `attrs` may hold `class`, `dataset`, event handlers (`onclick`) and
 * plain attributes; children are nodes or strings (inserted as text).
 * @param {string} tag
 * @param {Record<string, any>} [attrs]
 * @param {...(Node|string|number|null|undefined)} children
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "value") el.value = value;
    else if (key === "checked") el.checked = Boolean(value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Removes every child of `el` and appends `children`. */
export function replace(el, ...children) {
  el.replaceChildren();
  for (const child of children.flat(Infinity)) if (child) el.append(child);
  return el;
}

/** Formats a number for tables: `digits` significant digits, "–" for null. */
export function fmt(value, digits = 3) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  if (typeof value !== "number") return String(value);
  if (!Number.isFinite(value)) return "∞";
  return Number(value.toPrecision(digits)).toString();
}

/**
 * Returns δ as people write it, the way the server's figures do (`dpfl.plots.delta_text`, Python's
 * `%.3g`): 1e-5, 2.5e-6, 0.001, 0.5; never 0.00001 or 1e-05.
 * @param {number | null | undefined} d
 */
export function deltaText(d) {
  if (d === null || d === undefined || Number.isNaN(d)) return "–";
  const rounded = Number(d.toPrecision(3));
  const exponent = rounded === 0 ? 0 : Math.floor(Math.log10(Math.abs(rounded)));
  return exponent < -4 || exponent >= 3 ? rounded.toExponential() : rounded.toString();
}

/** Returns a status chip. */
export function chip(status) {
  return setChip(h("span"), status);
}

/** Shows `status` in an existing chip (in place, so a live page keeps its nodes). */
export function setChip(el, status) {
  el.className = `chip ${status}`;
  el.dataset.status = status;
  el.textContent = status;
  return el;
}

/** Returns a progress bar showing `fraction` (0..1), named `label` for assistive technology. */
export function progressBar(fraction, label = "progress") {
  const bar = h("div", { class: "bar", role: "progressbar", "aria-label": label, "aria-valuemin": 0, "aria-valuemax": 100 }, h("span"));
  return setProgress(bar, fraction);
}

/** Shows `fraction` (0..1) in an existing progress bar. */
export function setProgress(bar, fraction) {
  const percent = Math.round((fraction || 0) * 100);
  bar.setAttribute("aria-valuenow", percent);
  bar.firstChild.style.width = `${percent}%`;
  return bar;
}

/**
 * Sets the document's title: the page's own, then the app's name. `owner` is an element of the
 * page setting it: a page the router has since replaced is detached, and its title is dropped.
 */
export function setTitle(text, owner) {
  if (!owner.isConnected) return;
  document.title = text ? `${text} — DP-FL Explorer` : "DP-FL Explorer";
}

/** Shows `message` in the page banner (errors the user must see); `null` hides it. */
export function banner(message) {
  const el = document.getElementById("banner");
  el.textContent = message ?? "";
  el.hidden = !message;
}

/** Downloads `text` as a file named `name`. */
export function download(name, text, type = "text/plain") {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = h("a", { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  URL.revokeObjectURL(url);
}
