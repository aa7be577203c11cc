// Compare / sweep: final accuracy against ε, one line per algorithm with a ±1 std band, the
// Pareto frontier and the non-private reference; accuracy against ε spent for chosen runs.
// The view's state lives in the URL; export PNG, CSV and JSON.
import { api } from "../api.js";
import { draw, exportPng } from "../charts.js";
import { banner, download, h, replace, setTitle } from "../dom.js";
import { current, setParams } from "../state.js";

export async function render(root) {
  setTitle("Compare");
  const state = { sweep: "", log: "1", runs: "", ...current().params };
  const sweeps = (await api.listSweeps()).items;
  if (!state.sweep && !state.runs && sweeps.length) state.sweep = sweeps[0].id;
  const tradeoff = h("div", { class: "chart tall", id: "chart-tradeoff" });
  const spent = h("div", { class: "chart", id: "chart-spent" });
  const summaryBox = h("div");

  let lastCounts = "";
  async function load() {
    setParams(state);
    banner(null);
    try {
      if (state.sweep) {
        const summary = await api.summary(state.sweep);
        lastCounts = JSON.stringify(summary.counts);
        await draw(tradeoff, await api.tradeoffFigure({ sweep: state.sweep, log: state.log }));
        tradeoff.dataset.counts = lastCounts;
        replace(summaryBox, h("p", { class: "muted" }, `${summary.rows.length} points; ${Object.entries(summary.counts ?? {}).map(([k, v]) => `${v} ${k}`).join(", ")}`));
      }
      const runs = state.runs ? state.runs.split(",") : [];
      spent.parentElement.hidden = !runs.length;
      if (runs.length) await draw(spent, await api.spentFigure(runs));
    } catch (err) {
      banner(`Could not draw the comparison: ${err.message}`);
    }
  }

  const sweepSelect = h("select", { name: "sweep", onchange: (e) => { state.sweep = e.target.value; load(); } },
    h("option", { value: "" }, "—"), sweeps.map((s) => h("option", { value: s.id, selected: s.id === state.sweep ? "" : null },
      `${s.name || s.id} (${s.num_runs} runs)`)));
  const logBox = h("input", { type: "checkbox", name: "log", checked: state.log === "1", onchange: (e) => { state.log = e.target.checked ? "1" : "0"; load(); } });

  replace(root, h("h1", {}, "Compare"),
    h("div", { class: "toolbar" }, h("label", {}, "sweep", sweepSelect), h("label", {}, "log-scale ε", logBox),
      h("button", { onclick: () => exportPng(tradeoff, `tradeoff-${state.sweep}`) }, "Export PNG"),
      h("button", { onclick: () => state.sweep && (location.href = api.summaryCsvUrl(state.sweep)) }, "Export CSV"),
      h("button", { onclick: async () => state.sweep && download(`sweep-${state.sweep}.json`, JSON.stringify(await api.summary(state.sweep), null, 1), "application/json") }, "Export JSON"),
      h("a", { href: "#/new?mode=sweep" }, "new sweep")),
    h("div", { class: "card" }, tradeoff, summaryBox),
    h("div", { class: "card", hidden: true }, h("h2", {}, "Accuracy against ε spent so far"), spent));
  await load();
  // Redraw as the sweep's runs finish: poll its counts, redraw only when they change.
  const timer = setInterval(async () => {
    if (!state.sweep) return;
    const counts = JSON.stringify((await api.summary(state.sweep).catch(() => ({}))).counts);
    if (counts && counts !== lastCounts) await load();
  }, 2000);
  return () => clearInterval(timer);
}
