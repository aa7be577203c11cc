// Compare, for runs picked in the Runs list: their curves overlaid (test accuracy, test loss,
// training loss, ε spent; log-y and smoothing: GET /api/figures/curves) and a diff of their specs
// that shows only the fields that differ. The overlay's choices live in the URL with the view's.
import { api } from "../../api.js";
import { draw } from "../../charts.js";
import { h, replace } from "../../dom.js";

const METRICS = { accuracy: "test accuracy", balanced_accuracy: "test balanced accuracy", loss: "test loss", train_loss: "training loss (not private)", epsilon: "ε spent" };

/** A spec as {dotted path: value}, leaves only (a list is one value). */
export function flatten(value, prefix = "", out = {}) {
  if (value && typeof value === "object" && !Array.isArray(value)) {
    for (const [key, inner] of Object.entries(value)) flatten(inner, prefix ? `${prefix}.${key}` : key, out);
  } else if (prefix) {
    out[prefix] = value;
  }
  return out;
}

/** The fields whose values differ between `specs` (a field one spec lacks differs), sorted: [[path, values]]. */
export function differing(specs) {
  const flat = specs.map((s) => flatten(s));
  const paths = [...new Set(flat.flatMap((f) => Object.keys(f)))].sort();
  const shown = (v) => (v === undefined ? "–" : JSON.stringify(v));
  return paths.map((p) => [p, flat.map((f) => shown(f[p]))]).filter(([, values]) => new Set(values).size > 1);
}

/** The diff table: one row per differing field, one column per run; `same` says how many fields agree. */
function diffTable(runIds, specs) {
  const rows = differing(specs);
  const total = new Set(specs.flatMap((s) => Object.keys(flatten(s)))).size;
  return [
    h("p", { class: "muted diff-summary" }, `${rows.length} of ${total} fields differ; the other ${total - rows.length} are the same in every run.`),
    rows.length ? h("div", { class: "table-scroll" }, h("table", { class: "grid diff" },
      h("thead", {}, h("tr", {}, h("th", {}, "field"), runIds.map((id) => h("th", {}, h("a", { href: `#/runs/${id}` }, id.slice(0, 8)))))),
      h("tbody", {}, rows.map(([path, values]) => h("tr", { dataset: { field: path } }, h("th", { scope: "row" }, path), values.map((v) => h("td", {}, v))))))) : null,
  ];
}

/**
 * Returns the overlay card for `state.runs` (with `state.metric`, `state.logy`, `state.smooth`):
 * `el`, and `show()` that draws it for the runs now picked; `changed()` follows a choice.
 */
export function overlayCard(state, changed) {
  const chart = h("div", { class: "chart", id: "chart-overlay" });
  const diff = h("div", { class: "diff-body" });
  const metric = h("select", { name: "metric", onchange: (e) => { state.metric = e.target.value; changed(); } },
    Object.entries(METRICS).map(([value, text]) => h("option", { value, selected: value === state.metric ? "" : null }, text)));
  const logY = h("input", { type: "checkbox", name: "logy", checked: state.logy === "1", onchange: (e) => { state.logy = e.target.checked ? "1" : "0"; changed(); } });
  const smoothOut = h("output", {}, state.smooth);
  const smooth = h("input", { type: "range", name: "smooth", min: 0, max: 0.95, step: 0.05, value: state.smooth, "aria-label": "smoothing",
    oninput: (e) => { smoothOut.textContent = e.target.value; }, onchange: (e) => { state.smooth = e.target.value; changed(); } });
  const el = h("section", { class: "card overlay", "aria-label": "the picked runs overlaid", hidden: true },
    h("h2", {}, "The picked runs, round by round"),
    h("div", { class: "toolbar" }, h("label", {}, "metric ", metric), h("label", {}, "log-scale y ", logY), h("label", {}, "smoothing ", smooth, " ", smoothOut)),
    chart, h("h3", {}, "How their specs differ"), diff);
  let specsOf = "";
  return {
    el,
    async show() {
      el.hidden = state.runs.length === 0;
      if (el.hidden) return;
      const figure = await api.curvesFigure(state.runs, { metric: state.metric, log_y: state.logy === "1" ? 1 : 0, smoothing: Number(state.smooth) });
      await draw(chart, figure);
      const key = state.runs.join(",");
      if (key === specsOf) return;  // the diff changes with the runs only
      specsOf = key;
      const specs = await Promise.all(state.runs.map((id) => api.spec(id)));
      replace(diff, ...diffTable(state.runs, specs));
    },
  };
}
