// Compare: the runs behind a trade-off point. A click on a point, or the button of its row in the
// points table (the keyboard's way to the same panel), lists the point's seeds with their learning
// curves and one ledger line each.
import { api } from "../../api.js";
import { draw } from "../../charts.js";
import { deltaText, fmt, h, replace } from "../../dom.js";

// δ as people write it: 1e-5, 2.5e-6 (as the figures' axis titles do)

/**
 * Returns the plotted points of a trade-off figure, in panel and legend order:
 * `{algorithm, series, notion, metric, epsilon, mean, std, n, runIds}` (metric: what the server
 * plotted for its dataset, "accuracy" or "balanced accuracy").
 * The std is read off the series' band (its upper edge is mean + std, cell by cell, in the same ε
 * order as the line): the figure carries no other copy of it. No band, or a zero width, is "–".
 */
export function plottedPoints(figure) {
  const traces = figure.data ?? [];
  const band = (meta) => traces.find((t) => t.meta?.role === "band" && t.meta.series === meta.series && t.meta.notion === meta.notion);
  const order = figure.layout?.meta?.notions ?? [];
  return traces.filter((t) => t.meta?.role === "mean")
    .sort((a, b) => order.indexOf(a.meta.notion) - order.indexOf(b.meta.notion) || a.meta.series.localeCompare(b.meta.series))
    .flatMap((t) => t.customdata.map(([algorithm, epsilon, runIds], i) => {
      const upper = band(t.meta)?.y[i];
      const std = upper == null || upper === t.y[i] ? null : upper - t.y[i];
      return { algorithm, series: t.meta.series, notion: t.meta.notion, metric: t.meta.metric ?? "accuracy", epsilon, mean: t.y[i], std, n: runIds.length, runIds };
    }));
}

/** Returns the table of plotted points, one button per row calling `open([algorithm, epsilon, runIds])`. */
export function pointsTable(points, open) {
  const label = (p) => `runs of ${p.series} at ε = ${fmt(p.epsilon)}`;
  const metric = [...new Set(points.map((p) => p.metric))].join(" / ");
  return h("div", { class: "table-scroll" }, h("table", { class: "grid points" },
    h("caption", { class: "visually-hidden" }, `The plotted points: mean final ${metric} over seeds`),
    h("thead", {}, h("tr", {}, ["algorithm", "ε", `${metric} (mean ± std)`, "n", "notion", ""].map((c, i) =>
      h("th", { scope: "col", class: [1, 2, 3].includes(i) ? "num" : null }, c || h("span", { class: "visually-hidden" }, "runs"))))),
    h("tbody", {}, points.map((p) => h("tr", {},
      h("td", {}, p.series),
      h("td", { class: "num" }, fmt(p.epsilon)),
      h("td", { class: "num" }, `${p.mean.toFixed(3)} ± ${p.std == null ? "–" : p.std.toFixed(3)}`),
      h("td", { class: "num" }, String(p.n)),
      h("td", {}, p.notion ?? "–"),
      h("td", {}, h("button", { type: "button", "aria-label": label(p), onclick: () => open([p.algorithm, p.epsilon, p.runIds]) }, "runs")))))));
}

/** Returns σ in words: one number, or per silo as "mean (per silo min–max)", never a raw array. */
export function sigmaText(sigma) {
  if (typeof sigma === "number") return fmt(sigma);
  if (!Array.isArray(sigma) || !sigma.length) return "–";
  const mean = sigma.reduce((a, b) => a + b, 0) / sigma.length;
  return `${fmt(mean)} (per silo ${fmt(Math.min(...sigma))}–${fmt(Math.max(...sigma))})`;
}

/** One run's privacy in a line: ε spent, δ, accountant and σ (the run's own figures, from the ledger). */
function ledgerLine(run) {
  const sigma = sigmaText(run.noise_multiplier);
  return h("li", {}, `${run.id.slice(0, 8)}: ε = ${fmt(run.epsilon)}, δ = ${deltaText(run.delta)}, accountant ${run.accountant ?? "–"}, σ = ${sigma}`);
}

// two quick clicks: only the last point opened may fill the panel, whichever answer comes last
let opened = 0;

/** Fills `panel` with the runs of one point `[algorithm, epsilon, runIds]`. */
export async function showPoint(panel, [algorithm, epsilon, runIds]) {
  const mine = ++opened;
  const curves = h("div", { class: "chart", id: "chart-curves" });
  const heading = h("h2", { tabindex: "-1" }, `${algorithm} at ε = ${fmt(epsilon)}: ${runIds.length} runs`);
  const runs = await Promise.all(runIds.map((id) => api.getRun(id)));
  if (mine !== opened) return;
  replace(panel, heading,
    h("div", { class: "table-scroll" }, h("table", { class: "grid" },
      h("thead", {}, h("tr", {}, ["run", "seed", "ε spent", "accuracy"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, runs.map((r) => h("tr", { dataset: { run: r.id } },
        h("td", {}, h("a", { href: `#/runs/${r.id}` }, r.name || r.id.slice(0, 8))),
        h("td", { class: "num" }, r.seed ?? "–"),
        h("td", { class: "num" }, fmt(r.epsilon)),
        h("td", { class: "num" }, fmt(r.final_accuracy))))))),
    h("h3", {}, "Privacy of each run"),
    h("ul", { class: "ledger-lines" }, runs.map(ledgerLine)),
    h("h3", {}, "Learning curves"),
    curves);
  panel.hidden = false;
  heading.focus();  // a keyboard user lands on what the button opened
  const figure = await api.curvesFigure(runIds);
  if (mine === opened) await draw(curves, figure);
}
