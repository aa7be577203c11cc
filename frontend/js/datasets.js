// The datasets a menu offers (New run, sweeps, Budgets, the Runs filter): the registered ones whose
// files are here, then the uploads, each by its name. The `csv` loader itself is no choice: an
// upload is named, and a path goes in the advanced box.
import { api } from "./api.js";
import { h } from "./dom.js";

/** {value, text, upload} for each dataset a menu offers, from GET /api/datasets. */
export function datasetChoices({ datasets, uploads }) {
  return [
    ...datasets.filter((d) => d.available && d.name !== "csv").map((d) => ({ value: d.name, text: d.name, upload: false })),
    ...uploads.map(uploadChoice),
  ];
}

/** An upload as a menu's choice: by its name, marked as yours. */
export const uploadChoice = (upload) => ({ value: upload.name, text: `${upload.name} (your upload)`, upload: true });

/** A dataset select's option; an upload's is marked, so that the spec names it through the csv loader. */
export const datasetOption = (choice, selected) =>
  h("option", { value: choice.value, selected: selected ? "" : null, dataset: choice.upload ? { upload: "" } : {} }, choice.text);

/** The header row of a CSV file: its first line's cells (quoted ones unquoted), read from its first 64 KiB. */
export async function csvHeader(file) {
  const text = await file.slice(0, 65536).text();
  const line = text.replace(/^\uFEFF/, "").split(/\r?\n/).find((l) => l.trim() !== "") ?? "";
  const cells = [];
  let cell = "", quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quoted) {
      if (c === '"' && line[i + 1] === '"') { cell += '"'; i++; } else if (c === '"') quoted = false; else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") { cells.push(cell); cell = ""; } else cell += c;
  }
  cells.push(cell);
  return cells.map((c) => c.trim()).filter((c) => c !== "");
}

/** A file name as an upload name: snake_case, starting with a letter, at most 40 characters. */
export const uploadName = (filename) => {
  const stem = filename.replace(/\.[^.]*$/, "").toLowerCase().replace(/[^a-z0-9_]+/g, "_").replace(/^[^a-z]+/, "").slice(0, 40);
  return stem || "my_data";
};

/** "sick (160), well (80)": an upload's classes by their values, with their rows. */
export const classesText = (upload) => upload.classes.map((c) => `${c.name} (${c.count})`).join(", ");

/**
 * The upload panel: choose a CSV, its label and optional user-id column from its header, a name;
 * `onUploaded(upload)` follows a stored upload. Errors are shown beside the panel's fields.
 */
export function uploadPanel(onUploaded) {
  const file = h("input", { type: "file", name: "upload.file", accept: ".csv,text/csv" });
  const label = h("select", { name: "upload.label", disabled: true });
  const user = h("select", { name: "upload.user_id", disabled: true });
  const name = h("input", { name: "upload.name", placeholder: "snake_case, e.g. patients", maxlength: 40,
    // Enter here uploads; it must not submit the run form around the panel
    onkeydown: (e) => { if (e.key === "Enter") { e.preventDefault(); button.click(); } } });
  const status = h("p", { class: "upload-status", role: "status" });
  const button = h("button", { type: "button", class: "upload-button", disabled: true }, "Upload");
  const row = (text, field, control, hint) => h("label", { class: "field", dataset: { field: `upload.${field}` } }, h("span", {}, text), control,
    hint ? h("small", { class: "muted" }, hint) : null, h("small", { class: "error" }));
  const fields = h("div", { class: "upload-fields" },
    row("CSV file (a header row, one row per record)", "file", file),
    row("label column", "label", label),
    row("user-id column (blank: records are not grouped by user)", "user_id", user, "for user-level DP: its values say whose record each row is; it is not a feature"),
    row("name", "name", name, "how runs, menus and budgets name it"),
    button, status);
  const showError = (field, message) => {
    for (const el of fields.querySelectorAll(".field")) {
      const mine = el.dataset.field === `upload.${field}`;
      el.classList.toggle("invalid", mine && Boolean(message));
      el.querySelector(".error").textContent = mine ? message ?? "" : "";
    }
  };
  file.addEventListener("change", async () => {
    showError("file", "");
    status.textContent = "";
    const chosen = file.files[0];
    if (!chosen) return;
    const header = await csvHeader(chosen);
    if (header.length < 2) { showError("file", `its first line has ${header.length} column${header.length === 1 ? "" : "s"}; a CSV needs a header row naming a label and at least one feature.`); return; }
    label.replaceChildren(...header.map((c, i) => h("option", { value: c, selected: i === header.length - 1 ? "" : null }, c)));
    user.replaceChildren(h("option", { value: "" }, "none"), ...header.map((c) => h("option", { value: c }, c)));
    label.disabled = user.disabled = button.disabled = false;
    if (!name.value) name.value = uploadName(chosen.name);
  });
  button.addEventListener("click", async () => {
    const form = new FormData();
    form.append("file", file.files[0]);
    form.append("name", name.value.trim());
    form.append("label", label.value);
    if (user.value) form.append("user_id", user.value);
    button.disabled = true;
    status.textContent = "uploading and checking…";
    try {
      const stored = await api.uploadDataset(form);
      showError("", "");
      status.textContent = `Stored ${stored.name}: ${stored.num_rows} rows, classes ${classesText(stored)}` +
        (stored.user_id ? `; users from ${stored.user_id}` : "") + ". It is chosen above.";
      onUploaded(stored);
    } catch (err) {
      const [field, message] = Object.entries(err.fields ?? {})[0] ?? [err.status === 409 ? "name" : "file", err.message];
      showError(field, message);
      status.textContent = "Not stored: see the field marked.";
    } finally {
      button.disabled = false;
    }
  });
  return h("details", { class: "upload" }, h("summary", {}, "Upload your own CSV"), fields);
}
