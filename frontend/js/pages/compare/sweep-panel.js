// Compare: one sweep on its own. Its name, tags and notes (PATCH /api/sweeps/{id}), archive, its
// runs by status, a link to them in the Runs list, the batches its runs train in, and its
// hyperparameter charts: parallel
// coordinates and how much of the accuracy's variance each parameter explains.
import { api } from "../../api.js";
import { drawWhenVisible } from "../../charts.js";
import { annotationEditor } from "../../annotations.js";
import { h, replace } from "../../dom.js";

const STATUSES = ["succeeded", "running", "preparing", "queued", "failed", "cancelled"];

/** "6 runs: 5 succeeded, 1 failed" */
function countsText(sweep) {
  const parts = STATUSES.filter((s) => sweep.counts[s]).map((s) => `${sweep.counts[s]} ${s}`);
  return `${sweep.num_runs} runs: ${parts.join(", ") || "none yet"}`;
}

/** "Batch 1 · isrl_mbsgd · 4 runs (ε 1, 4 · seeds 0, 1) · 3 succeeded, 1 running", one item per batch. */
function batchList(sweep) {
  const byId = new Map(sweep.runs.map((r) => [r.id, r]));
  const distinct = (values) => [...new Set(values.filter((v) => v != null))].sort((a, b) => a - b).join(", ");
  const items = sweep.batches.map((batch, i) => {
    const runs = batch.run_ids.map((id) => byId.get(id)).filter(Boolean);
    const statuses = STATUSES.map((s) => [s, runs.filter((r) => r.status === s).length]).filter(([, n]) => n);
    const targets = distinct(runs.map((r) => r.target_epsilon));
    return h("li", {},
      h("strong", {}, `Batch ${i + 1}`), ` · ${batch.algorithm} · ${runs.length} runs (`,
      targets ? `ε ${targets} · ` : "", `seeds ${distinct(runs.map((r) => r.seed))}) · `,
      statuses.map(([s, n]) => `${n} ${s}`).join(", "));
  });
  const alone = sweep.runs.length - sweep.batches.reduce((n, b) => n + b.run_ids.length, 0);
  const lead = sweep.batches.length
    ? `${sweep.runs.length - alone} runs train in ${sweep.batches.length} batch${sweep.batches.length === 1 ? "" : "es"}` +
      ` (each batch in one worker task, one computation per round); ${alone} alone.`
    : "Every run trains alone: no two share an algorithm that batches, its params, data, model and schedule.";
  return h("div", { class: "batches" }, h("p", {}, lead), items.length ? h("ul", {}, items) : null);
}

/** Fills `panel` with sweep `id`; resolves once its charts are drawn, when scrolled to. `onChange()` follows an edit. */
export async function showSweep(panel, id, onChange = () => {}) {
  const sweep = await api.getSweep(id);
  const parcoords = h("div", { class: "chart", id: "chart-parcoords" });
  const importance = h("div", { class: "chart", id: "chart-importance" });
  const archive = h("button", { type: "button" });
  const archiveState = h("span", { class: "archive-state", role: "status" });
  const showArchived = (archived) => { archive.textContent = archived ? "Restore" : "Archive"; sweep.archived = archived; };
  archive.addEventListener("click", async () => {
    try {
      showArchived((await api.patchSweep(id, { archived: !sweep.archived })).archived);
      onChange();
      archiveState.textContent = sweep.archived ? "Archived: it leaves the sweep list." : "";
    } catch (err) {
      archiveState.textContent = `Not saved: ${err.message}`;
    }
  });
  showArchived(sweep.archived);
  const title = h("h2", {}, `Sweep ${sweep.name || sweep.id}`);
  replace(panel, title,
    h("p", {}, h("span", { class: "counts" }, countsText(sweep)), " · ",
      h("a", { href: `#/runs?sweep=${encodeURIComponent(id)}` }, "runs of this sweep")),
    annotationEditor(sweep, async (changes) => {
      const saved = await api.patchSweep(id, changes);
      title.textContent = `Sweep ${saved.name || saved.id}`;
      onChange();
      return saved;
    }).el,
    h("div", { class: "toolbar" }, archive, h("a", { href: `#/new?mode=sweep&sweep=${encodeURIComponent(id)}`, class: "clone-sweep" }, "Clone sweep"), archiveState),
    h("h3", {}, "How its runs train"), batchList(sweep),
    // one above the other, full width: a parcoords axis per varying parameter needs the room
    h("h3", {}, "Hyperparameters of each run"), parcoords,
    h("h3", {}, "What explains the results"), importance);
  panel.hidden = false;
  await Promise.all([
    drawWhenVisible(parcoords, () => api.parcoordsFigure(id)),
    drawWhenVisible(importance, () => api.importanceFigure(id)),
  ]);
}
