// Runs: table with status chips, live progress, filters, sort, paging, compare, CSV export.
import { api, subscribe } from "../api.js";
import { banner, chip, download, fmt, h, progressBar, replace } from "../dom.js";
import { current, go, setParams } from "../state.js";

const COLUMNS = [
  ["", null], ["status", "status"], ["progress", null], ["algorithm", "algorithm"], ["dataset", null],
  ["ε target", "target_epsilon"], ["ε spent", "epsilon"], ["accuracy", "final_accuracy"],
  ["duration", null], ["created", "created_at"],
];
const LIMIT = 25;

function row(run, selected) {
  const box = h("input", { type: "checkbox", checked: selected.has(run.id), onchange: (e) => {
    e.target.checked ? selected.add(run.id) : selected.delete(run.id);
  } });
  return h("tr", { dataset: { run: run.id } },
    h("td", {}, box),
    h("td", { class: "status" }, chip(run.status)),
    h("td", { class: "progress" }, progressBar(run.progress), h("span", { class: "muted" }, ` ${run.current_round}/${run.rounds}`)),
    h("td", {}, h("a", { href: `#/runs/${run.id}` }, run.algorithm)),
    h("td", {}, run.dataset),
    h("td", { class: "num" }, fmt(run.target_epsilon)),
    h("td", { class: "num eps" }, fmt(run.epsilon)),
    h("td", { class: "num acc" }, fmt(run.final_accuracy)),
    h("td", { class: "num" }, run.duration_s == null ? "–" : `${fmt(run.duration_s, 2)} s`),
    h("td", { class: "muted" }, new Date(run.created_at).toLocaleString()),
  );
}

function toCsv(runs) {
  const cols = ["id", "status", "algorithm", "dataset", "target_epsilon", "epsilon", "final_accuracy", "duration_s"];
  const esc = (v) => (v === null || v === undefined ? "" : /[",\n]/.test(String(v)) ? `"${String(v).replaceAll('"', '""')}"` : String(v));
  return [cols.join(","), ...runs.map((r) => cols.map((c) => esc(r[c])).join(","))].join("\n") + "\n";
}

export async function render(root) {
  const params = current().params;
  const state = { status: params.status ?? "", algorithm: params.algorithm ?? "", dataset: params.dataset ?? "", sort: params.sort ?? "-created_at",
    offset: Number(params.offset ?? 0) };
  const selected = new Set();
  const [algorithms, { datasets }] = await Promise.all([api.algorithms(), api.datasets()]);
  const tbody = h("tbody");
  const pager = h("div", { class: "pager" });
  let visible = [];

  const filter = (name, options) => h("label", {}, name,
    h("select", { name, onchange: (e) => { state[name] = e.target.value; state.offset = 0; load(); } },
      h("option", { value: "" }, "all"), options.map((o) => h("option", { value: o, selected: state[name] === o ? "" : null }, o))));

  async function load() {
    setParams(state);
    try {
      const page = await api.listRuns({ ...state, limit: LIMIT });
      visible = page.items;
      replace(tbody, visible.map((r) => row(r, selected)));
      if (!visible.length) tbody.append(h("tr", {}, h("td", { colspan: COLUMNS.length, class: "muted" }, "No runs yet: start one from New run.")));
      replace(pager,
        h("button", { disabled: state.offset === 0, onclick: () => { state.offset = Math.max(0, state.offset - LIMIT); load(); } }, "‹ prev"),
        h("span", { class: "muted" }, `${page.total ? state.offset + 1 : 0}–${state.offset + visible.length} of ${page.total}`),
        h("button", { disabled: page.next_offset === null, onclick: () => { state.offset = page.next_offset; load(); } }, "next ›"));
    } catch (err) {
      banner(`Could not load runs: ${err.message}`);
    }
  }

  const head = h("tr", {}, COLUMNS.map(([label, key]) => h("th", { onclick: key ? () => {
    state.sort = state.sort === `-${key}` ? key : `-${key}`;
    load();
  } : null }, label)));

  replace(root,
    h("h1", {}, "Runs"),
    h("div", { class: "toolbar" },
      filter("status", ["queued", "running", "succeeded", "failed", "cancelled"]),
      filter("algorithm", algorithms.map((a) => a.name)),
      filter("dataset", datasets.map((d) => d.name)),
      h("button", { onclick: () => selected.size && go("compare", { runs: [...selected].join(",") }) }, "Compare selected"),
      h("button", { onclick: () => download("runs.csv", toCsv(visible), "text/csv") }, "Export CSV")),
    h("table", { class: "grid runs" }, h("thead", {}, head), tbody),
    pager);
  await load();

  // Live progress: patch rows in place as events arrive; reload when a new run appears.
  return subscribe({}, (ev) => {
    const tr = tbody.querySelector(`tr[data-run="${CSS.escape(ev.id)}"]`);
    if (!tr) return;
    tr.querySelector(".status").replaceChildren(chip(ev.status));
    tr.querySelector(".progress").replaceChildren(progressBar(ev.progress), h("span", { class: "muted" }, ` ${ev.current_round}/${ev.rounds}`));
    tr.querySelector(".eps").textContent = fmt(ev.epsilon);
    tr.querySelector(".acc").textContent = fmt(ev.final_accuracy);
  }, load);
}
