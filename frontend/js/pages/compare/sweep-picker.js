// Compare: the sweeps to draw, as a searchable list of checkboxes (GET /api/sweeps?q=).
import { api } from "../../api.js";
import { h, replace } from "../../dom.js";

// a search shows this many sweeps; the chosen ones are always listed, found or not
const LIMIT = 30;
const SEARCH_DELAY_MS = 250;

/**
 * Returns the picker: a search box and one checkbox per sweep. `chosen` is the list of selected
 * sweep ids, in the order they were picked; `onChange(ids)` is called with the new list.
 * Returns `{el, ready, refresh}`: `ready` resolves once the first list is shown.
 */
export function sweepPicker(chosen, onChange) {
  const list = h("ul", { class: "sweep-list" });
  const known = new Map();  // id → sweep, so a chosen sweep stays listed when a search misses it
  let timer = null;

  function item(sweep) {
    const box = h("input", { type: "checkbox", name: "sweep", value: sweep.id, checked: chosen.includes(sweep.id),
      onchange: (e) => {
        chosen = e.target.checked ? [...chosen, sweep.id] : chosen.filter((id) => id !== sweep.id);
        onChange(chosen);
      } });
    const archived = sweep.archived ? h("span", { class: "muted" }, " (archived)") : null;
    return h("li", {}, h("label", {}, box, sweep.name || sweep.id),
      h("span", { class: "muted" }, ` ${sweep.num_runs} runs`), archived);
  }

  async function search(q) {
    // archived=all: an archived sweep named in a link must still show as chosen
    const found = (await api.searchSweeps({ q, archived: q ? "all" : "false", limit: LIMIT })).items;
    const missing = chosen.filter((id) => !known.has(id) && !found.some((s) => s.id === id));
    const extra = await Promise.all(missing.map((id) => api.getSweep(id).catch(() => null)));
    for (const s of [...found, ...extra]) if (s) known.set(s.id, s);
    const shown = [...chosen.map((id) => known.get(id)).filter(Boolean), ...found.filter((s) => !chosen.includes(s.id))];
    replace(list, shown.length ? shown.map(item) : h("li", { class: "muted" }, q ? `No sweep matches “${q}”.` : "No sweeps yet."));
  }

  const input = h("input", { type: "search", "aria-label": "search sweeps", placeholder: "search sweeps (name, tag, id)",
    oninput: (e) => { clearTimeout(timer); timer = setTimeout(() => search(e.target.value.trim()), SEARCH_DELAY_MS); } });
  const el = h("fieldset", { class: "sweep-picker" }, h("legend", {}, "Sweeps"), input, list);
  // refresh: after a sweep was renamed or archived elsewhere on the page
  return { el, ready: search(""), refresh: () => { known.clear(); return search(input.value.trim()); } };
}
