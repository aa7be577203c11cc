// Compare: final accuracy against ε for any sweeps and hand-picked runs on one chart (one panel per
// privacy notion), the runs behind each point, accuracy against ε spent for the picked runs, and,
// for one sweep, its own panel. The view's state lives in the URL (`sweeps=a,b`, `runs=x,y`,
// `log`, `guaranteed` to hide runs whose guarantee is broken, `band`, `individual` to draw each
// run, `average`, and the picked runs' overlay: `metric`, `logy`, `smooth`; an old link's
// `sweep=a` is read as `sweeps=a`); export the chart as PNG and its points as CSV or JSON, for any
// view. Picked runs are also overlaid round by round, with a diff of their specs.
import { api } from "../api.js";
import { draw, exportPng, onPointClick, preloadCharts } from "../charts.js";
import { banner, download, h, replace, setTitle } from "../dom.js";
import { current, setParams } from "../state.js";
import { plottedPoints, pointsTable, showPoint } from "./compare/drilldown.js";
import { overlayCard } from "./compare/overlay.js";
import { sweepPicker } from "./compare/sweep-picker.js";
import { showSweep } from "./compare/sweep-panel.js";

// left-out runs named one by one (each is a request for its status); the rest are counted
const LEFT_OUT_NAMED = 10;
const POLL_MS = 2000;

const list = (csv) => (csv ? csv.split(",").filter(Boolean) : []);

/** Why a run is not on the chart, from its status: "cancelled", "succeeded, never evaluated". */
const LIVE = ["queued", "preparing", "running"];
// the bands the server draws (`dpfl.plots.BANDS`), as the legend names them
const BANDS = { std: "± 1 std", se: "± 1 standard error", ci95: "95 % CI of the mean", minmax: "min–max" };
// a succeeded run with an accuracy is left out for want of its dataset's metric (balanced accuracy)
const notDrawnBecause = (run) => (run.status !== "succeeded" ? run.status
  : run.final_accuracy == null ? "succeeded, never evaluated" : "succeeded, its dataset's metric not recorded");

async function showLeftOut(el, ids) {
  el.hidden = !ids.length;
  if (!ids.length) return;
  const runs = await Promise.all(ids.slice(0, LEFT_OUT_NAMED).map((id) => api.getRun(id).catch(() => ({ id, status: "unknown" }))));
  const more = ids.length - runs.length;
  const link = (r, i) => [i ? ", " : "", h("a", { href: `#/runs/${r.id}` }, r.id.slice(0, 8)), ` (${notDrawnBecause(r)})`];
  // a run still on its way is not left out: it is drawn once it finishes
  const waiting = runs.filter((r) => LIVE.includes(r.status));
  const gone = runs.filter((r) => !LIVE.includes(r.status));
  replace(el,
    waiting.length ? ["Not finished yet (drawn when they succeed): ", waiting.flatMap(link), gone.length ? ". " : ""] : "",
    gone.length ? ["Left out (not succeeded, so nothing to plot): ", gone.flatMap(link)] : "",
    more > 0 ? ` and ${more} more` : "");
}

export async function render(root) {
  setTitle("Compare", root);
  const params = current().params;
  if (params.sweep || params.sweeps || params.runs) preloadCharts();
  // `sweep=` is how links made before multi-sweep compare name their sweep
  const state = { sweeps: list([params.sweep, params.sweeps].filter(Boolean).join(",")), runs: list(params.runs), log: params.log ?? "1", guaranteed: params.guaranteed ?? "0", band: params.band ?? "std", individual: params.individual ?? "0", average: list(params.average),
    metric: params.metric ?? "accuracy", logy: params.logy ?? "0", smooth: params.smooth ?? "0" };
  const url = () => ({
    log: state.log, guaranteed: state.guaranteed === "1" ? "1" : "", band: state.band === "std" ? "" : state.band,
    individual: state.individual === "1" ? "1" : "", average: state.average.join(","), sweeps: state.sweeps.join(","), runs: state.runs.join(","),
    metric: state.runs.length && state.metric !== "accuracy" ? state.metric : "", logy: state.runs.length && state.logy === "1" ? "1" : "",
    smooth: state.runs.length && Number(state.smooth) > 0 ? state.smooth : "",
  });

  const tradeoff = h("div", { class: "chart tall", id: "chart-tradeoff" });
  const warning = h("p", { class: "notion-warning", role: "status", hidden: true });
  const leftOut = h("p", { class: "left-out muted", hidden: true });
  const hiddenNote = h("p", { class: "not-guaranteed-hidden muted", hidden: true });
  // Fields that vary between the runs: each splits the points into series unless the user asks
  // to average over it (never silently).
  const averageBox = h("fieldset", { class: "average-over", hidden: true });
  const chartCard = h("div", { class: "card" }, warning, leftOut, hiddenNote, averageBox, tradeoff);
  function showAverage(varying) {
    state.average = state.average.filter((f) => varying.includes(f));
    averageBox.hidden = !varying.length;
    replace(averageBox, h("legend", {}, "Average over (as over seeds)"), varying.map((field) => h("label", {},
      h("input", { type: "checkbox", name: "average", value: field, checked: state.average.includes(field), onchange: (e) => {
        state.average = e.target.checked ? [...state.average, field] : state.average.filter((f) => f !== field);
        load();
      } }), ` ${field}`)));
  }
  const hint = h("p", { class: "muted" }, "Pick one or more sweeps above, or runs from the Runs list (“Compare selected”).");
  const points = h("section", { class: "card points-card", "aria-label": "plotted points" });
  const drilldown = h("section", { class: "card drilldown", "aria-label": "runs of a point", hidden: true });
  const spent = h("div", { class: "chart", id: "chart-spent" });
  const spentCard = h("div", { class: "card", hidden: true }, h("h2", {}, "Accuracy against ε spent so far"), spent);
  const sweepPanel = h("section", { class: "card sweep-panel", "aria-label": "the sweep", hidden: true });
  const overlay = overlayCard(state, () => { setParams(url(), root); overlay.show().catch((err) => banner(`Could not overlay the runs: ${err.message}`)); });
  const oneSweep = () => (state.sweeps.length === 1 ? state.sweeps[0] : null);
  // the runs drawn and how they are grouped: the chart and its exports ask for the same points
  const selection = () => ({ sweeps: state.sweeps.join(","), runs: state.runs.join(","), guaranteed: state.guaranteed, band: state.band, average: state.average.join(",") });

  let shownSweep = null;
  let clicks = false;
  let lastCounts = "";
  let loads = 0;

  const openPoint = (customdata) => showPoint(drilldown, customdata).catch((err) => banner(`Could not show the runs of this point: ${err.message}`));

  /** Draws the selection; `selectionChanged` closes the panels that belonged to the old one. */
  async function load({ selectionChanged = false } = {}) {
    // two quick ticks start two loads: only the latest may draw, whichever answer comes last
    const mine = ++loads;
    const stale = () => mine !== loads;
    setParams(url(), root);
    banner(null);
    const any = state.sweeps.length + state.runs.length > 0;
    hint.hidden = any;
    chartCard.hidden = points.hidden = !any;
    for (const b of [csv, json]) {
      b.disabled = !any;
      b.title = any ? "the plotted points, at the ε spent, with their bands and runs" : "pick sweeps or runs to export their points";
    }
    if (selectionChanged) drilldown.hidden = true;
    try {
      if (oneSweep() !== shownSweep) {
        shownSweep = oneSweep();
        sweepPanel.hidden = true;
        if (shownSweep) showSweep(sweepPanel, shownSweep, () => picker.refresh()).catch((err) => banner(`Could not show the sweep: ${err.message}`));
      }
      spentCard.hidden = !state.runs.length;
      await overlay.show();
      if (stale()) return;
      if (state.runs.length) {
        const figure = await api.spentFigure(state.runs);
        if (stale()) return;
        await draw(spent, figure);
      }
      if (!any) return;
      const seen = await counts();
      const figure = await api.tradeoffFigure({ ...selection(), log: state.log, individual: state.individual });
      if (stale()) return;
      lastCounts = seen;
      await draw(tradeoff, figure);
      if (!clicks) { onPointClick(tradeoff, openPoint); clicks = true; }
      const meta = figure.layout.meta ?? {};
      warning.textContent = meta.warning ?? "";
      warning.hidden = !meta.warning;
      showAverage(meta.varying ?? []);
      const hiddenRuns = meta.not_guaranteed ?? [];
      hiddenNote.textContent = `${hiddenRuns.length} run${hiddenRuns.length === 1 ? "" : "s"} hidden: not guaranteed (their ledger does not cover every release).`;
      hiddenNote.hidden = !hiddenRuns.length;
      const rows = plottedPoints(figure);
      replace(points, h("h2", {}, "Plotted points"),
        rows.length ? pointsTable(rows, openPoint) : h("p", { class: "muted" }, "No private points yet."));
      await showLeftOut(leftOut, meta.left_out ?? []);
    } catch (err) {
      banner(`Could not draw the comparison: ${err.message}`);
    }
  }

  /** The selected sweeps' run counts by status, as one string: the poll redraws when it changes. */
  async function counts() {
    const all = await Promise.all(state.sweeps.map((id) => api.summary(id).then((s) => s.counts).catch(() => null)));
    return JSON.stringify(all);
  }

  const picker = sweepPicker(state.sweeps, (ids) => { state.sweeps = ids; load({ selectionChanged: true }); });
  const logBox = h("input", { type: "checkbox", name: "log", checked: state.log === "1", onchange: (e) => { state.log = e.target.checked ? "1" : "0"; load(); } });
  const bandSelect = h("select", { name: "band", onchange: (e) => { state.band = e.target.value; load(); } },
    Object.entries(BANDS).map(([value, label]) => h("option", { value, selected: value === state.band }, label)));
  const individualBox = h("input", { type: "checkbox", name: "individual", checked: state.individual === "1", onchange: (e) => { state.individual = e.target.checked ? "1" : "0"; load(); } });
  const guaranteedBox = h("input", { type: "checkbox", name: "guaranteed", checked: state.guaranteed === "1", onchange: (e) => { state.guaranteed = e.target.checked ? "1" : "0"; load(); } });
  const csv = h("button", { onclick: () => { location.href = api.tradeoffPointsCsvUrl(selection()); } }, "Export CSV");
  const json = h("button", { onclick: async () => {
    try {
      download("compare-points.json", JSON.stringify(await api.tradeoffPoints(selection()), null, 1), "application/json");
    } catch (err) { banner(`Could not export the points: ${err.message}`); }
  } }, "Export JSON");

  replace(root, h("h1", {}, "Compare"),
    h("div", { class: "toolbar" }, h("label", {}, "log-scale ε", logBox), h("label", {}, "hide not guaranteed", guaranteedBox),
      h("label", {}, "band", bandSelect), h("label", {}, "each run", individualBox),
      h("button", { onclick: () => exportPng(tradeoff, "tradeoff") }, "Export PNG"), csv, json,
      h("a", { href: "#/new?mode=sweep" }, "new sweep")),
    picker.el, hint, chartCard, points, drilldown, overlay.el, spentCard, sweepPanel);
  await Promise.all([picker.ready, load()]);
  // Redraw as the sweeps' runs finish: poll their counts, redraw only when they change.
  const timer = setInterval(async () => {
    if (!state.sweeps.length) return;
    const now = await counts();
    if (now !== lastCounts) await load();
  }, POLL_MS);
  return () => clearInterval(timer);
}
