// Runs: a table of chosen columns with status chips and live progress; search, filters (status,
// algorithm, dataset, tags, sweep, archived), sort, paging; bulk compare, archive, delete and tag;
// CSV export.
import { api, subscribe } from "../api.js";
import { banner, chip, deltaText, fmt, h, progressBar, replace, setChip, setProgress, setTitle } from "../dom.js";
import { externalChip } from "../external.js";
import { current, go, setParams } from "../state.js";
import { viewsMenu } from "../views.js";

const LIMIT = 25;
// Runs created elsewhere arrive as events for ids the page does not show: one reload for a burst.
const RELOAD_AFTER_MS = 500;
// The search box asks the server once typing pauses.
const SEARCH_AFTER_MS = 300;
const COLUMNS_KEY = "dpfl.runs.columns";

const seconds = (s) => (s == null ? "–" : `${fmt(s, 2)} s`);
const runLink = (run, text) => h("a", { href: `#/runs/${run.id}` }, text);

/**
 * The columns a user may show: label, the server's sort key (null: not sortable), the cell's class
 * (live updates find cells by it) and its content. `params.<key>` columns are added per page.
 */
const COLUMNS = {
  name: { label: "name", sort: "name", cell: (r) => [runLink(r, r.name || r.id.slice(0, 8)), r.archived ? " " : null, r.archived ? h("span", { class: "chip archived" }, "archived") : null, externalChip(r) ? " " : null, externalChip(r)] },
  tags: { label: "tags", sort: null, cls: "tags" },
  status: { label: "status", sort: "status", cls: "status", cell: (r) => chip(r.status) },
  progress: { label: "progress", sort: null, cls: "progress", cell: (r) => [progressBar(r.progress, `progress of run ${r.id}`), h("span", { class: "muted rounds" }, ` ${r.current_round}/${r.rounds}`)] },
  algorithm: { label: "algorithm", sort: "algorithm", cell: (r) => runLink(r, r.algorithm) },
  dataset: { label: "dataset", sort: "dataset", cell: (r) => r.dataset },
  notion: { label: "notion", sort: "notion", cell: (r) => (r.notion === "none" ? "not private" : r.notion) },
  target_epsilon: { label: "ε target", sort: "target_epsilon", cls: "num", cell: (r) => fmt(r.target_epsilon) },
  epsilon: { label: "ε spent", sort: "epsilon", cls: "num eps", cell: (r) => fmt(r.epsilon) },
  delta: { label: "δ", sort: "delta", cls: "num", cell: (r) => deltaText(r.delta) },
  accountant: { label: "accountant", sort: "accountant", cell: (r) => r.accountant ?? "–" },
  sigma: { label: "σ", sort: null, cls: "num", cell: (r) => (Array.isArray(r.noise_multiplier) ? "per silo" : fmt(r.noise_multiplier, 4)) },
  seed: { label: "seed", sort: null, cls: "num", cell: (r) => r.seed ?? "–" },
  rounds: { label: "rounds", sort: "rounds", cls: "num", cell: (r) => r.rounds },
  sweep: { label: "sweep", sort: null, cls: "sweep" },
  final_accuracy: { label: "accuracy", sort: "final_accuracy", cls: "num acc", cell: (r) => fmt(r.final_accuracy) },
  best_accuracy: { label: "best accuracy", sort: "best_accuracy", cls: "num", cell: (r) => fmt(r.best_accuracy) },
  final_balanced_accuracy: { label: "balanced accuracy", sort: "final_balanced_accuracy", cls: "num balanced", cell: (r) => fmt(r.final_balanced_accuracy) },
  final_loss: { label: "loss", sort: "final_loss", cls: "num", cell: (r) => fmt(r.final_loss) },
  duration_s: { label: "duration", sort: "duration_s", cls: "num", cell: (r) => seconds(r.duration_s) },
  created_at: { label: "created", sort: "created_at", cls: "muted", cell: (r) => new Date(r.created_at).toLocaleString() },
};
const DEFAULT_COLUMNS = ["name", "tags", "status", "progress", "algorithm", "dataset", "sweep", "target_epsilon", "epsilon", "final_accuracy", "duration_s", "created_at"];

/** Returns a params.* column: the spec's value of that algorithm param ("–" when the run has none). */
function paramColumn(key) {
  const name = key.slice("params.".length);
  return { label: key, sort: null, cls: "param", cell: (r) => {
    const v = r.params?.[name];
    return v === undefined ? "–" : typeof v === "number" ? fmt(v, 4) : typeof v === "object" ? JSON.stringify(v) : String(v);
  } };
}

const column = (key) => COLUMNS[key] ?? paramColumn(key);
const splitList = (text) => (text ? text.split(",").filter(Boolean) : []);

/** The columns to show: the URL's, else the ones this browser last showed, else the default. */
function initialColumns(params) {
  const chosen = splitList(params.cols ?? localStorage.getItem(COLUMNS_KEY) ?? "");
  const known = chosen.filter((k) => k in COLUMNS || k.startsWith("params."));
  return known.length ? known : DEFAULT_COLUMNS;
}

/** A column header: sortable ones are buttons showing the order (▲ ascending, ▼ descending) and aria-sort. */
function header(label, key, sort, onSort) {
  if (!key) return h("th", { scope: "col" }, label ? label : h("span", { class: "visually-hidden" }, "select"));
  const order = sort === key ? "ascending" : sort === `-${key}` ? "descending" : "none";
  return h("th", { scope: "col", "aria-sort": order },
    h("button", { type: "button", class: "sort", dataset: { key }, onclick: () => onSort(key) }, label,
      h("span", { class: "sort-mark", "aria-hidden": "true" }, order === "ascending" ? " ▲" : order === "descending" ? " ▼" : "")));
}

export async function render(root) {
  setTitle("Runs", root);
  const params = current().params;
  // the key order is the CSV link's parameter order
  const state = { status: params.status ?? "", algorithm: params.algorithm ?? "", dataset: params.dataset ?? "", sort: params.sort ?? "-created_at",
    q: params.q ?? "", filter: params.filter ?? "", tag: splitList(params.tag), sweep: params.sweep ?? "", archived: params.archived ?? "", offset: Number(params.offset ?? 0) };
  let columns = initialColumns(params);
  const selected = new Set();
  const seen = new Map();  // id → run, for the bulk actions on runs of earlier pages
  const paramKeys = new Set(columns.filter((k) => k.startsWith("params.")));
  let items = [];
  let loads = 0;  // a list answered after a later request was sent is not drawn over its answer
  const [algorithms, datasets] = await Promise.all([api.algorithms(), api.datasets()]);
  const tbody = h("tbody");
  const head = h("tr");
  const pager = h("div", { class: "pager" });
  const active = h("div", { class: "active-filters" });
  const menuList = h("fieldset", { class: "columns-list" }, h("legend", { class: "visually-hidden" }, "columns shown"));
  const bulkResult = h("div", { class: "bulk-result", role: "status" });
  const newTag = h("input", { type: "text", name: "bulk-tag", "aria-label": "tag to add to the selected runs", placeholder: "tag" });
  // every run matching the filters (not only this page), from the server
  const csv = h("a", { class: "button", download: "runs.csv" }, "Export CSV");

  const reset = () => { state.offset = 0; load(); };
  const filter = (name, options) => h("label", {}, name,
    h("select", { name, onchange: (e) => { state[name] = e.target.value; reset(); } },
      h("option", { value: "" }, "all"), options.map((o) => h("option", { value: o, selected: state[name] === o ? "" : null }, o))));

  const sortBy = (key) => {
    state.sort = state.sort === `-${key}` ? key : `-${key}`;
    load();
  };
  const addTagFilter = (tag) => {
    if (!state.tag.includes(tag)) state.tag.push(tag);
    reset();
  };

  function cell(run, key) {
    const col = column(key);
    if (key === "tags") {
      return h("td", { class: "tags" }, run.tags.map((t) => h("button", { type: "button", class: "tag-chip", "aria-label": `filter by tag ${t}`, onclick: () => addTagFilter(t) }, t)));
    }
    if (key === "sweep") {
      return h("td", { class: "sweep" }, run.sweep_id ? h("a", { href: `#/runs?sweep=${encodeURIComponent(run.sweep_id)}`, "aria-label": `runs of sweep ${run.sweep_name || run.sweep_id}` }, run.sweep_name || run.sweep_id.slice(0, 8)) : "–");
    }
    return h("td", { class: col.cls ?? null, dataset: { col: key } }, col.cell(run));
  }

  function row(run) {
    const box = h("input", { type: "checkbox", checked: selected.has(run.id), "aria-label": `select run ${run.id}`, onchange: (e) => {
      e.target.checked ? selected.add(run.id) : selected.delete(run.id);
    } });
    return h("tr", { dataset: { run: run.id } }, h("td", {}, box), columns.map((key) => cell(run, key)));
  }

  /** The Columns menu: one checkbox per column, the params.* ones of the runs seen so far included. */
  function drawMenu() {
    const focused = menuList.contains(document.activeElement) ? document.activeElement.value : null;
    const keys = [...Object.keys(COLUMNS), ...[...paramKeys].sort()];
    replace(menuList, h("legend", { class: "visually-hidden" }, "columns shown"), keys.map((key) => h("label", { class: "check" },
      h("input", { type: "checkbox", value: key, checked: columns.includes(key), onchange: (e) => toggleColumn(key, e.target.checked) }),
      ` ${column(key).label}`)));
    if (focused) menuList.querySelector(`input[value="${CSS.escape(focused)}"]`)?.focus();
  }

  function toggleColumn(key, on) {
    // kept in the order of the menu, so a column comes back where it was
    const order = [...Object.keys(COLUMNS), ...[...paramKeys].sort()];
    columns = order.filter((k) => (k === key ? on : columns.includes(k)));
    draw();
  }

  /** The active tag and sweep filters, each with a button that removes it. */
  function drawActive() {
    const remove = (label, onclick) => h("button", { type: "button", class: "filter-chip", "aria-label": `remove filter ${label}`, onclick }, `${label} ✕`);
    replace(active,
      state.tag.map((t) => remove(`tag ${t}`, () => { state.tag = state.tag.filter((x) => x !== t); reset(); })),
      state.sweep ? [remove(`sweep ${state.sweep.slice(0, 8)}`, () => { state.sweep = ""; reset(); }),
        h("a", { href: `#/compare?sweep=${encodeURIComponent(state.sweep)}` }, "compare this sweep")] : null);
  }

  /** Shows the last page loaded with the chosen columns (no request: choosing columns is local). */
  function draw() {
    setParams({ ...state, tag: state.tag.join(","), cols: columns.join(",") }, root);
    // the columns last shown (chosen, or from a link) are the next list's, wherever it is opened
    localStorage.setItem(COLUMNS_KEY, columns.join(","));
    // the headers are rebuilt with the new order: a sort button that had the focus keeps it
    const focused = head.contains(document.activeElement) ? document.activeElement.dataset.key : null;
    replace(head, header("", null), columns.map((key) => header(column(key).label, column(key).sort, state.sort, sortBy)));
    if (focused) head.querySelector(`button[data-key="${focused}"]`)?.focus();
    replace(tbody, items.map(row));
    if (!items.length) tbody.append(h("tr", {}, h("td", { colspan: columns.length + 1, class: "muted" }, "No runs match: start one from New run, or change the filters.")));
    drawMenu();
    drawActive();
  }

  async function load() {
    const { offset, ...filters } = state;
    csv.href = api.runsCsvUrl(filters);
    // only the latest load speaks: an older one (a reload an event scheduled, say) that answers
    // late must neither redraw the list nor show its refusal over a newer filter's
    const mine = ++loads;
    try {
      const page = await api.listRuns({ ...state, limit: LIMIT });
      if (mine !== loads) return;
      showFilterError(null);
      items = page.items;
      for (const run of items) {
        seen.set(run.id, run);
        for (const key of Object.keys(run.params ?? {})) paramKeys.add(`params.${key}`);
      }
      draw();
      replace(pager,
        h("button", { disabled: offset === 0, onclick: () => { state.offset = Math.max(0, offset - LIMIT); load(); } }, "‹ prev"),
        h("span", { class: "muted" }, `${page.total ? offset + 1 : 0}–${offset + items.length} of ${page.total}`),
        h("button", { disabled: page.next_offset === null, onclick: () => { state.offset = page.next_offset; load(); } }, "next ›"));
    } catch (err) {
      if (mine !== loads) return;
      const refused = err.fields?.["query.filter"];
      if (refused) showFilterError(`filter ${refused}`);
      else banner(`Could not load runs: ${err.message}`);
    }
  }

  /** Runs `action(id)` on each selected run; shows each refusal with its run, then reloads. */
  async function bulk(verb, action) {
    if (!selected.size) { replace(bulkResult, h("p", { class: "muted" }, `Select runs to ${verb}.`)); return; }
    const refused = [];
    let done = 0;
    for (const id of [...selected]) {
      try { await action(id); done += 1; } catch (err) { refused.push([id, err.message]); }
    }
    replace(bulkResult, h("p", {}, `${verb}: ${done} of ${done + refused.length} run${done + refused.length === 1 ? "" : "s"}`),
      refused.length ? h("ul", { class: "error-text bulk-errors" }, refused.map(([id, message]) => h("li", { dataset: { run: id } }, `${id.slice(0, 8)}: ${message}`))) : null);
    await load();
  }

  const deleteSelected = () => {
    if (selected.size && !window.confirm(`Delete ${selected.size} run${selected.size === 1 ? "" : "s"} with their metrics and ledgers?`)) return;
    bulk("deleted", async (id) => { await api.deleteRun(id); selected.delete(id); });
  };
  const tagSelected = () => {
    const tag = newTag.value.trim();
    if (!tag) { replace(bulkResult, h("p", { class: "error-text" }, "Type the tag to add.")); newTag.focus(); return; }
    bulk(`tagged ${tag}`, async (id) => { seen.set(id, await api.patchRun(id, { tags: [...(seen.get(id)?.tags ?? []), tag] })); });
  };

  // a filter expression, applied on Enter or when the field is left; the server's refusal shows beside it
  const filterError = h("p", { id: "filter-error", class: "error-text", role: "alert" });
  const applyFilter = (e) => {
    const text = e.target.value.trim();
    if (text !== state.filter) { state.filter = text; reset(); }
  };
  const expression = h("input", { type: "text", name: "filter", value: state.filter, spellcheck: "false", "aria-describedby": "filter-error",
    placeholder: "epsilon <= 2 and params.clip = 1", onchange: applyFilter, onkeydown: (e) => { if (e.key === "Enter") applyFilter(e); } });
  const showFilterError = (message) => {
    filterError.textContent = message ?? "";
    expression.toggleAttribute("aria-invalid", Boolean(message));
  };

  let searchTimer = null;
  const search = h("input", { type: "search", name: "q", value: state.q, placeholder: "name, tag, algorithm, id…", oninput: (e) => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => { state.q = e.target.value.trim(); reset(); }, SEARCH_AFTER_MS);
  } });

  newTag.addEventListener("keydown", (e) => { if (e.key === "Enter") tagSelected(); });

  replace(root,
    h("h1", {}, "Runs"),
    h("div", { class: "toolbar" },
      h("label", {}, "search", search),
      h("label", { class: "filter-expression" }, "filter", expression),
      filter("status", ["queued", "preparing", "running", "succeeded", "failed", "cancelled"]),
      filter("algorithm", algorithms.map((a) => a.name)),
      // runs are listed under an upload's own name, beside every registered dataset's
      filter("dataset", [...datasets.datasets.map((d) => d.name), ...datasets.uploads.map((u) => u.name)]),
      h("label", { class: "check" }, h("input", { type: "checkbox", name: "archived", checked: state.archived === "all",
        onchange: (e) => { state.archived = e.target.checked ? "all" : ""; reset(); } }), " show archived"),
      h("details", { class: "columns-menu" }, h("summary", {}, "Columns"), menuList),
      viewsMenu("runs"),
      csv),
    filterError,
    active,
    h("div", { class: "toolbar bulk", role: "group", "aria-label": "selected runs" },
      h("button", { onclick: () => selected.size && go("compare", { runs: [...selected].join(",") }) }, "Compare selected"),
      h("button", { onclick: () => bulk("archived", async (id) => { await api.patchRun(id, { archived: true }); selected.delete(id); }) }, "Archive selected"),
      h("button", { class: "danger", onclick: deleteSelected }, "Delete selected"),
      newTag, h("button", { onclick: tagSelected }, "Add tag")),
    bulkResult,
    h("div", { class: "table-scroll" }, h("table", { class: "grid runs" }, h("thead", {}, head), tbody)),
    pager);
  await load();

  // Live progress: patch rows in place as events arrive; reload (debounced) when a run the page
  // has never heard of appears, as one created from another tab or over the API does. A run
  // first heard of in a snapshot counts too: a stream that reconnected starts with one, and a
  // run created meanwhile appears only there.
  const known = new Set();
  let reload = null;
  const stop = subscribe({}, (ev) => {
    const isNew = !known.has(ev.id);
    known.add(ev.id);
    const tr = tbody.querySelector(`tr[data-run="${CSS.escape(ev.id)}"]`);
    if (!tr) {
      if (isNew) { clearTimeout(reload); reload = setTimeout(load, RELOAD_AFTER_MS); }
      return;
    }
    // only the columns shown are there to update
    const status = tr.querySelector(".status .chip");
    if (status) setChip(status, ev.status);
    const bar = tr.querySelector(".progress .bar");
    if (bar) setProgress(bar, ev.progress);
    const set = (selector, text) => { const el = tr.querySelector(selector); if (el) el.textContent = text; };
    set(".rounds", ` ${ev.current_round}/${ev.rounds}`);
    set(".eps", fmt(ev.epsilon));
    set(".acc", fmt(ev.final_accuracy));
    set(".balanced", fmt(ev.final_balanced_accuracy));
  }, load);
  return () => { stop(); clearTimeout(reload); clearTimeout(searchTimer); };
}
