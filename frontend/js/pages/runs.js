// Runs: table with status chips, live progress, filters, sort, paging, compare, CSV export.
import { api, subscribe } from "../api.js";
import { banner, chip, fmt, h, progressBar, replace, setChip, setProgress, setTitle } from "../dom.js";
import { current, go, setParams } from "../state.js";

const COLUMNS = [
  ["", null], ["status", "status"], ["progress", null], ["algorithm", "algorithm"], ["dataset", null],
  ["ε target", "target_epsilon"], ["ε spent", "epsilon"], ["accuracy", "final_accuracy"],
  ["duration", null], ["created", "created_at"],
];
const LIMIT = 25;
// Runs created elsewhere arrive as events for ids the page does not show: one reload for a burst.
const RELOAD_AFTER_MS = 500;

function row(run, selected) {
  const box = h("input", { type: "checkbox", checked: selected.has(run.id), "aria-label": `select run ${run.id}`, onchange: (e) => {
    e.target.checked ? selected.add(run.id) : selected.delete(run.id);
  } });
  return h("tr", { dataset: { run: run.id } },
    h("td", {}, box),
    h("td", { class: "status" }, chip(run.status)),
    h("td", { class: "progress" }, progressBar(run.progress, `progress of run ${run.id}`), h("span", { class: "muted rounds" }, ` ${run.current_round}/${run.rounds}`)),
    h("td", {}, h("a", { href: `#/runs/${run.id}` }, run.algorithm)),
    h("td", {}, run.dataset),
    h("td", { class: "num" }, fmt(run.target_epsilon)),
    h("td", { class: "num eps" }, fmt(run.epsilon)),
    h("td", { class: "num acc" }, fmt(run.final_accuracy)),
    h("td", { class: "num" }, run.duration_s == null ? "–" : `${fmt(run.duration_s, 2)} s`),
    h("td", { class: "muted" }, new Date(run.created_at).toLocaleString()),
  );
}

/** A column header: sortable ones are buttons showing the order (▲ ascending, ▼ descending) and aria-sort. */
function header(label, key, sort, onSort) {
  if (!key) return h("th", { scope: "col" }, label ? label : h("span", { class: "visually-hidden" }, "select"));
  const order = sort === key ? "ascending" : sort === `-${key}` ? "descending" : "none";
  return h("th", { scope: "col", "aria-sort": order },
    h("button", { type: "button", class: "sort", dataset: { key }, onclick: () => onSort(key) }, label,
      h("span", { class: "sort-mark", "aria-hidden": "true" }, order === "ascending" ? " ▲" : order === "descending" ? " ▼" : "")));
}

export async function render(root) {
  setTitle("Runs");
  const params = current().params;
  const state = { status: params.status ?? "", algorithm: params.algorithm ?? "", dataset: params.dataset ?? "", sort: params.sort ?? "-created_at",
    offset: Number(params.offset ?? 0) };
  const selected = new Set();
  const [algorithms, { datasets }] = await Promise.all([api.algorithms(), api.datasets()]);
  const tbody = h("tbody");
  const head = h("tr");
  const pager = h("div", { class: "pager" });
  // every run matching the filters (not only this page), from the server
  const csv = h("a", { class: "button", download: "runs.csv" }, "Export CSV");

  const filter = (name, options) => h("label", {}, name,
    h("select", { name, onchange: (e) => { state[name] = e.target.value; state.offset = 0; load(); } },
      h("option", { value: "" }, "all"), options.map((o) => h("option", { value: o, selected: state[name] === o ? "" : null }, o))));

  const sortBy = (key) => {
    state.sort = state.sort === `-${key}` ? key : `-${key}`;
    load();
  };

  async function load() {
    setParams(state);
    const { offset, ...filters } = state;
    csv.href = api.runsCsvUrl(filters);
    // the headers are rebuilt with the new order: a sort button that had the focus keeps it
    const focused = head.contains(document.activeElement) ? document.activeElement.dataset.key : null;
    replace(head, COLUMNS.map(([label, key]) => header(label, key, state.sort, sortBy)));
    if (focused) head.querySelector(`button[data-key="${focused}"]`).focus();
    try {
      const page = await api.listRuns({ ...state, limit: LIMIT });
      const visible = page.items;
      replace(tbody, visible.map((r) => row(r, selected)));
      if (!visible.length) tbody.append(h("tr", {}, h("td", { colspan: COLUMNS.length, class: "muted" }, "No runs yet: start one from New run.")));
      replace(pager,
        h("button", { disabled: offset === 0, onclick: () => { state.offset = Math.max(0, offset - LIMIT); load(); } }, "‹ prev"),
        h("span", { class: "muted" }, `${page.total ? offset + 1 : 0}–${offset + visible.length} of ${page.total}`),
        h("button", { disabled: page.next_offset === null, onclick: () => { state.offset = page.next_offset; load(); } }, "next ›"));
    } catch (err) {
      banner(`Could not load runs: ${err.message}`);
    }
  }

  replace(root,
    h("h1", {}, "Runs"),
    h("div", { class: "toolbar" },
      filter("status", ["queued", "running", "succeeded", "failed", "cancelled"]),
      filter("algorithm", algorithms.map((a) => a.name)),
      filter("dataset", datasets.map((d) => d.name)),
      h("button", { onclick: () => selected.size && go("compare", { runs: [...selected].join(",") }) }, "Compare selected"),
      csv),
    h("div", { class: "table-scroll" }, h("table", { class: "grid runs" }, h("thead", {}, head), tbody)),
    pager);
  await load();

  // Live progress: patch rows in place as events arrive; reload (debounced) when a run the page
  // has never heard of appears, as one created from another tab or over the API does.
  const known = new Set();
  let reload = null;
  const stop = subscribe({}, (ev, { snapshot } = {}) => {
    const isNew = !known.has(ev.id);
    known.add(ev.id);
    const tr = tbody.querySelector(`tr[data-run="${CSS.escape(ev.id)}"]`);
    if (!tr) {
      if (isNew && !snapshot) { clearTimeout(reload); reload = setTimeout(load, RELOAD_AFTER_MS); }
      return;
    }
    setChip(tr.querySelector(".status .chip"), ev.status);
    setProgress(tr.querySelector(".progress .bar"), ev.progress);
    tr.querySelector(".rounds").textContent = ` ${ev.current_round}/${ev.rounds}`;
    tr.querySelector(".eps").textContent = fmt(ev.epsilon);
    tr.querySelector(".acc").textContent = fmt(ev.final_accuracy);
  }, load);
  return () => { stop(); clearTimeout(reload); };
}
