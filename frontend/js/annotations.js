// The name, tags and notes a user gives a run or a sweep: one small form, saved with one PATCH.
import { ApiError } from "./api.js";
import { h } from "./dom.js";

/** Returns the tags typed in a box, comma-separated (a tag holds no comma), blanks left out. */
export function parseTags(text) {
  return text.split(",").map((t) => t.trim()).filter(Boolean);
}

/**
 * Returns {el, set(values)}: a form editing `{name, tags, notes}`. Save calls `save(changes)` with
 * the fields that changed (a PATCH body) and expects the saved item back; a 422 is shown beside
 * the field its `loc` names, anything else beside the Save button.
 * @param {{name?: string, tags?: string[], notes?: string}} values
 * @param {(changes: Record<string, any>) => Promise<{name: string, tags: string[], notes: string}>} save
 */
export function annotationEditor(values, save) {
  let saved = { name: values.name ?? "", tags: values.tags ?? [], notes: values.notes ?? "" };
  const inputs = {
    name: h("input", { name: "name", type: "text", maxlength: 200, autocomplete: "off" }),
    tags: h("input", { name: "tags", type: "text", autocomplete: "off", placeholder: "baseline, paper" }),
    notes: h("textarea", { name: "notes", rows: 2 }),
  };
  const errors = Object.fromEntries(Object.keys(inputs).map((k) => [k, h("span", { class: "error", id: `annotation-${k}-error`, role: "alert" })]));
  const status = h("span", { class: "muted annotation-status", role: "status" });
  const field = (key, label) => h("label", { class: `field annotation-${key}` }, h("span", {}, label), inputs[key], errors[key]);

  function set(next) {
    saved = { name: next.name ?? "", tags: next.tags ?? [], notes: next.notes ?? "" };
    inputs.name.value = saved.name;
    inputs.tags.value = saved.tags.join(", ");
    inputs.notes.value = saved.notes;
  }

  function showErrors(fields) {
    for (const [key, input] of Object.entries(inputs)) {
      // "tags.3" (one tag) is shown beside the tags box
      const message = Object.entries(fields).find(([loc]) => loc === key || loc.startsWith(`${key}.`))?.[1] ?? "";
      errors[key].textContent = message;
      input.closest(".field").classList.toggle("invalid", Boolean(message));
      if (message) input.setAttribute("aria-describedby", errors[key].id);
      else input.removeAttribute("aria-describedby");
    }
  }

  async function submit(e) {
    e.preventDefault();
    const typed = { name: inputs.name.value, tags: parseTags(inputs.tags.value), notes: inputs.notes.value };
    const changes = Object.fromEntries(Object.entries(typed).filter(([k, v]) => JSON.stringify(v) !== JSON.stringify(saved[k])));
    showErrors({});
    if (!Object.keys(changes).length) { status.textContent = "nothing changed"; return; }
    status.textContent = "saving…";
    try {
      set(await save(changes));
      status.textContent = "saved";
    } catch (err) {
      const fields = err instanceof ApiError ? err.fields : {};
      showErrors(fields);
      status.textContent = Object.keys(fields).length ? "not saved" : `not saved: ${err.message}`;
    }
  }

  const el = h("form", { class: "annotations", onsubmit: submit },
    field("name", "name"), field("tags", "tags (comma-separated)"), field("notes", "notes"),
    h("div", { class: "toolbar" }, h("button", { type: "submit" }, "Save"), status));
  set(saved);
  return { el, set };
}
