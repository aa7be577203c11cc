// Compare: one sweep on its own. Its name, tags and notes (PATCH /api/sweeps/{id}), archive, its
// runs by status, a link to them in the Runs list, and its hyperparameter charts: parallel
// coordinates and how much of the accuracy's variance each parameter explains.
import { api } from "../../api.js";
import { drawWhenVisible } from "../../charts.js";
import { annotationEditor } from "../../annotations.js";
import { h, replace } from "../../dom.js";

const STATUSES = ["succeeded", "running", "queued", "failed", "cancelled"];

/** "6 runs: 5 succeeded, 1 failed" */
function countsText(sweep) {
  const parts = STATUSES.filter((s) => sweep.counts[s]).map((s) => `${sweep.counts[s]} ${s}`);
  return `${sweep.num_runs} runs: ${parts.join(", ") || "none yet"}`;
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
    h("div", { class: "toolbar" }, archive, archiveState),
    // one above the other, full width: a parcoords axis per varying parameter needs the room
    h("h3", {}, "Hyperparameters of each run"), parcoords,
    h("h3", {}, "What explains the accuracy"), importance);
  panel.hidden = false;
  await Promise.all([
    drawWhenVisible(parcoords, () => api.parcoordsFigure(id)),
    drawWhenVisible(importance, () => api.importanceFigure(id)),
  ]);
}
