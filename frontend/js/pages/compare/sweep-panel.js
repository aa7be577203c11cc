// Compare: one sweep on its own. Its name, tags and notes (PATCH /api/sweeps/{id}), archive, its
// runs by status, a link to them in the Runs list, and its hyperparameter charts: parallel
// coordinates and how much of the accuracy's variance each parameter explains.
// The editor is this page's own until the runs pages' annotationEditor is shared (issue 18).
import { api } from "../../api.js";
import { draw } from "../../charts.js";
import { h, replace } from "../../dom.js";

const STATUSES = ["succeeded", "running", "queued", "failed", "cancelled"];

/** "6 runs: 5 succeeded, 1 failed" */
function countsText(sweep) {
  const parts = STATUSES.filter((s) => sweep.counts[s]).map((s) => `${sweep.counts[s]} ${s}`);
  return `${sweep.num_runs} runs: ${parts.join(", ") || "none yet"}`;
}

/** "name: at most 200 characters; tags: …" from a 422, else the error's message. */
function failure(err) {
  const fields = Object.entries(err.fields ?? {});
  return `Not saved: ${fields.length ? fields.map(([k, v]) => `${k}: ${v}`).join("; ") : err.message}`;
}

/** The editable name, tags and notes of `sweep`; `onSaved(sweep)` gets the sweep as saved. */
function editor(sweep, onSaved) {
  const name = h("input", { name: "name", value: sweep.name });
  const tags = h("input", { name: "tags", value: sweep.tags.join(", "), placeholder: "comma-separated" });
  const notes = h("textarea", { name: "notes", rows: 3 }, sweep.notes);
  const state = h("span", { class: "save-state", role: "status" });
  const save = async (e) => {
    e.preventDefault();
    state.textContent = "Saving…";
    const changes = { name: name.value, tags: tags.value.split(",").map((t) => t.trim()).filter(Boolean), notes: notes.value };
    try {
      onSaved(await api.patchSweep(sweep.id, changes));
      state.textContent = "Saved.";
    } catch (err) {
      state.textContent = failure(err);
    }
  };
  return h("form", { class: "sweep-edit", onsubmit: save },
    h("label", { class: "field" }, h("span", {}, "name"), name),
    h("label", { class: "field" }, h("span", {}, "tags"), tags),
    h("label", { class: "field" }, h("span", {}, "notes"), notes),
    h("div", { class: "toolbar" }, h("button", { type: "submit", class: "primary" }, "Save"), state));
}

/** Fills `panel` with sweep `id`; resolves once its charts are drawn. `onChange()` follows an edit. */
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
      archiveState.textContent = failure(err);
    }
  });
  showArchived(sweep.archived);
  const title = h("h2", {}, `Sweep ${sweep.name || sweep.id}`);
  replace(panel, title,
    h("p", {}, h("span", { class: "counts" }, countsText(sweep)), " · ",
      h("a", { href: `#/runs?sweep=${encodeURIComponent(id)}` }, "runs of this sweep")),
    editor(sweep, (saved) => { title.textContent = `Sweep ${saved.name || saved.id}`; onChange(); }),
    h("div", { class: "toolbar" }, archive, archiveState),
    // one above the other, full width: a parcoords axis per varying parameter needs the room
    h("h3", {}, "Hyperparameters of each run"), parcoords,
    h("h3", {}, "What explains the accuracy"), importance);
  panel.hidden = false;
  const [p, i] = await Promise.all([api.parcoordsFigure(id), api.importanceFigure(id)]);
  await Promise.all([draw(parcoords, p), draw(importance, i)]);
}
