// The New sweep page's own fields: a name, the algorithms (each with a model it takes), the
// privacy axis (ε, σ or μ values: the target the privacy fieldset chose), the seeds, and any other
// spec field as an axis. Every list is typed and checked beside its field before the preview or
// the submit asks the API; the API's grid takes any dotted spec field, and so does "other field".
import { fmt, h, replace } from "./dom.js";

/** The privacy targets, as the spec names them, and the words the axis is shown with. */
const TARGETS = { epsilon: "ε values", noise_multiplier: "noise multiplier σ values", mu: "μ values" };
const OTHER = "other";
/** Whether grid key `key` is one the section's own fields sweep (the algorithms, the seeds, the privacy axis). */
const ownKey = (key) => key === "algorithm" || key === "seed" || (key.startsWith("privacy.") && key.slice("privacy.".length) in TARGETS);

/** A typed list of `text`'s comma-separated entries: `{values}`, or `{error}` naming the first bad entry. */
export function parseList(text, type) {
  const trimmed = text.trim();
  if (type.kind === "json" && trimmed.startsWith("[")) {
    try {
      const values = JSON.parse(trimmed);
      if (Array.isArray(values) && values.length) return { values };
    } catch { /* read as a plain list below */ }
  }
  const entries = trimmed.split(",").map((s) => s.trim()).filter(Boolean);
  if (!entries.length) return { error: `give at least one value, separated by commas${type.example ? `, e.g. ${type.example}` : ""}.` };
  const values = [];
  for (const entry of entries) {
    const value = typedEntry(entry, type);
    if (value.error) return value;
    values.push(value.value);
  }
  const repeated = values.find((v, i) => values.indexOf(v) !== i);
  if (repeated !== undefined) return { error: `${JSON.stringify(repeated)} is given twice; give each value once.` };
  return { values };
}

/** One entry as its type's value, or `{error}` saying what is allowed. */
function typedEntry(entry, type) {
  const bad = (allowed) => ({ error: `${JSON.stringify(entry)} is not ${allowed}.` });
  if (type.kind === "enum") return type.values.includes(entry) ? { value: entry } : bad(`one of ${type.values.join(", ")}`);
  const number = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(entry) ? Number(entry) : NaN;
  if (type.kind === "json" || type.kind === "numword") {
    if (Number.isFinite(number)) return { value: number };
    if (type.kind === "json" || type.words.includes(entry)) return { value: entry };
    return bad(`a number${type.words.length ? ` or one of ${type.words.join(", ")}` : ""}`);
  }
  if (!Number.isFinite(number)) return bad(type.kind === "integer" ? "a whole number" : "a number");
  if (type.kind === "integer" && !Number.isInteger(number)) return bad("a whole number");
  if (type.min !== undefined && (type.exclusiveMin ? number <= type.min : number < type.min)) return bad(`${type.exclusiveMin ? ">" : "≥"} ${type.min}`);
  if (type.max !== undefined && number > type.max) return bad(`≤ ${type.max}`);
  return { value: number };
}

/** A JSON Schema's entry type (a param's, a kind option's). */
function schemaType(schema) {
  const plain = schema.anyOf?.find((s) => s.type === "number" || s.type === "integer") ?? schema;
  if (schema.enum) return { kind: "enum", values: schema.enum.map(String) };
  if (schema.type === "boolean") return { kind: "enum", values: ["true", "false"] };
  if (schema.anyOf && schema.anyOf.some((s) => s.enum)) return { kind: "numword", words: schema.anyOf.flatMap((s) => s.enum ?? []) };
  const exclusive = plain.exclusiveMinimum !== undefined;
  return { kind: plain.type === "integer" ? "integer" : "number", min: exclusive ? plain.exclusiveMinimum : plain.minimum, exclusiveMin: exclusive, max: plain.maximum };
}

/**
 * The fields an axis can sweep, as {key: {label, type}}: the spec's own, the ticked algorithms'
 * params and the partition kinds' options; "other field" takes any dotted path.
 */
function axisChoices(algorithms, catalogue, datasets) {
  const choices = {
    rounds: { label: "rounds", type: { kind: "integer", min: 1, example: "10, 20, 50" } },
    "dataset.silos": { label: "silos", type: { kind: "integer", min: 1, example: "4, 10" } },
    participation: { label: "silos per round", type: { kind: "integer", min: 1 } },
    "privacy.delta": { label: "δ", type: { kind: "number", min: 0, exclusiveMin: true, max: 1, example: "1e-5, 1e-6" } },
    "privacy.accountant": { label: "accountant", type: { kind: "enum", values: catalogue.accountants.filter((a) => !a.data_dependent).map((a) => a.name) } },
    "dataset.name": { label: "dataset", type: { kind: "enum", values: datasets.filter((d) => d.available && d.name !== "csv").map((d) => d.name) } },
    "dataset.partition.kind": { label: "partition", type: { kind: "enum", values: catalogue.partition_kinds.map((k) => k.name) } },
    "dataset.features.pca": { label: "PCA components", type: { kind: "integer", min: 1 } },
    "model.name": { label: "model", type: { kind: "enum", values: catalogue.models.map((m) => m.name) } },
  };
  for (const kind of catalogue.partition_kinds) {
    for (const [option, schema] of Object.entries(kind.options)) {
      choices[`dataset.partition.${option}`] ??= { label: `partition ${option}`, type: schemaType(schema) };
    }
  }
  for (const algorithm of algorithms) {
    for (const [key, schema] of Object.entries(algorithm.params_schema?.properties ?? {})) {
      choices[`params.${key}`] ??= { label: `params.${key}`, type: schemaType(schema) };
    }
  }
  return choices;
}

/** A list field: its label, its text box, and the error beside it; `name` is the grid key its errors come under. */
function listField(label, name, value, hint) {
  return h("label", { class: "field", dataset: { field: `grid.${name}` } }, h("span", {}, label),
    h("input", { name: `sweep.${name}`, value, autocomplete: "off" }), hint ? h("small", { class: "muted" }, hint) : null, h("small", { class: "error" }));
}

/** One axis row: which field, its path when "other", its values, and a button that removes the row. */
function axisRow(choices, key = "rounds", values = "") {
  const known = key in choices;
  const chooser = h("select", { name: "axis.field", "aria-label": "field to sweep" },
    Object.entries(choices).map(([k, c]) => h("option", { value: k, selected: k === key ? "" : null }, c.label)),
    h("option", { value: OTHER, selected: known ? null : "" }, "other field (a dotted spec path)"));
  const path = h("input", { name: "axis.path", placeholder: "e.g. dataset.options.num_samples", value: known ? "" : key, "aria-label": "dotted spec path", hidden: known });
  const list = h("input", { name: "axis.values", value: values, placeholder: "values, separated by commas", "aria-label": "values" });
  // a row added empty is judged once its values are typed, or at submit: not the moment it appears
  const row = h("div", { class: "field axis", dataset: values ? {} : { untouched: "" } }, h("span", {}, "axis"), h("div", { class: "axis-controls" }, chooser, path, list,
    h("button", { type: "button", class: "remove-axis", "aria-label": "remove this axis", onclick: () => { row.remove(); list.form?.dispatchEvent(new Event("change")); } }, "×")),
  h("small", { class: "error" }));
  const keyed = () => { path.hidden = chooser.value !== OTHER; row.dataset.field = `grid.${axisKey(row)}`; };
  list.addEventListener("input", () => delete row.dataset.untouched);
  chooser.addEventListener("change", keyed);
  path.addEventListener("input", keyed);
  keyed();
  return row;
}

/** The grid key an axis row sweeps. */
const axisKey = (row) => {
  const chosen = row.querySelector("[name='axis.field']").value;
  return chosen === OTHER ? row.querySelector("[name='axis.path']").value.trim() : chosen;
};

/**
 * Returns the sweep section: `el` (the fieldset), `relevant(form)` (its privacy axis follows the
 * target), `errors()` (the lists' errors by field), `request(spec, paramsBy)` (the POST body), and
 * `initial`: a cloned sweep's grid fills it.
 */
export function sweepSection({ algorithms, catalogue, datasets, spec, sweep }) {
  const choices = axisChoices(algorithms, catalogue, datasets);
  const grid = sweep?.grid ?? {};
  const text = (values) => (values ?? []).map((v) => (typeof v === "string" || typeof v === "number" ? String(v) : JSON.stringify(v))).join(", ");
  const ticked = new Set(grid.algorithm ?? [spec.algorithm, ...(spec.algorithm === "fedavg" ? [] : ["fedavg"])]);
  const notes = new Map();
  const axes = h("div", { class: "axes" });
  for (const [key, values] of Object.entries(grid)) {
    if (ownKey(key)) continue;
    axes.append(axisRow(choices, key, text(values)));
  }
  const el = h("fieldset", { class: "sweep" }, h("legend", {}, "Sweep"),
    h("label", { class: "field", dataset: { field: "name" } }, h("span", {}, "name"),
      h("input", { name: "sweep.name", value: sweep ? `copy of ${sweep.name || sweep.id}` : "", placeholder: "e.g. ε on digits, 3 seeds", maxlength: 200 }), h("small", { class: "error" })),
    h("fieldset", { class: "field", dataset: { field: "grid.algorithm" } }, h("legend", {}, "algorithms"),
      h("small", { class: "muted" }, "the params shown above are the chosen algorithm's; choose another to set its own"),
      algorithms.map((a) => {
        const note = h("small", { class: "muted algorithm-note" });
        notes.set(a.name, note);
        return h("label", { class: "check" }, h("input", { type: "checkbox", name: "sweep.algorithms", value: a.name, checked: ticked.has(a.name) }), ` ${a.name} `, note);
      }),
      h("small", { class: "error" })),
    Object.entries(TARGETS).map(([target, label]) => listField(label, `privacy.${target}`,
      text(grid[`privacy.${target}`]) || (target === "epsilon" ? "0.5, 1, 2, 4, 8" : target === "mu" ? "0.5, 1, 2" : "0.8, 1, 1.5"),
      "one run per value and seed; non-private algorithms run once per seed")),
    listField("seeds", "seed", text(grid.seed) || "0, 1, 2"),
    h("div", { class: "axes-group" }, h("p", { class: "muted" }, "Other axes: any field of the spec, one run per combination."), axes,
      h("button", { type: "button", class: "add-axis", onclick: (e) => { axes.append(axisRow(choices)); e.target.form.dispatchEvent(new Event("change")); } }, "Add an axis")));

  /** The axis rows to judge and send: all but those added and not yet typed in. */
  const rows = () => [...axes.children].filter((row) => !("untouched" in row.dataset));
  const chosen = (form) => [...form.querySelectorAll("input[name='sweep.algorithms']:checked")].map((b) => algorithms.find((a) => a.name === b.value));
  const target = (form) => form.querySelector("input[name=target]:checked")?.value ?? "epsilon";
  /** The model each ticked algorithm runs with: the form's where it takes it, else the first it takes. */
  const models = (form, model) => Object.fromEntries(chosen(form).map((a) => [a.name, a.models.includes(model) ? model : a.models[0]]));

  return {
    el,
    /** Of ε, σ and μ, only the target's single box is left out and its list shown; each algorithm's note says its model. */
    relevant(form) {
      // the privacy fieldset follows the ticked algorithms, not the one whose params are shown
      form.querySelector("fieldset.privacy").hidden = !chosen(form).some((a) => a.private);
      for (const name of Object.keys(TARGETS)) {
        form.querySelector(`.field[data-field="privacy.${name}"]`).hidden = true;
        el.querySelector(`.field[data-field="grid.privacy.${name}"]`).hidden = name !== target(form);
      }
      const model = form.elements["model.name"].value;
      const own = models(form, model);
      for (const [name, note] of notes) note.textContent = own[name] && own[name] !== model ? `(runs with ${own[name]}: it does not take ${model})` : "";
    },
    /** The lists' errors, by the grid field they are shown beside. */
    errors(form, spec) {
      const errors = {};
      const algorithmsChosen = chosen(form);
      if (!algorithmsChosen.length) errors["grid.algorithm"] = "tick at least one algorithm.";
      const refused = algorithmsChosen.filter((a) => !a.datasets.includes(spec.dataset.name));
      if (refused.length) {
        errors["grid.algorithm"] = refused.map((a) => `${a.name} does not take ${spec.dataset.name} (it takes ${a.datasets.join(", ")})`).join("; ") +
          ": untick it or choose one of those datasets.";
      }
      const check = (field, text, type) => { const parsed = parseList(text, type); if (parsed.error) errors[field] = parsed.error; return parsed.values; };
      if (algorithmsChosen.some((a) => a.private)) check(`grid.privacy.${target(form)}`, form.elements[`sweep.privacy.${target(form)}`].value, { kind: "number", min: 0, exclusiveMin: true, example: "1, 2, 4" });
      check("grid.seed", form.elements["sweep.seed"].value, { kind: "integer", min: 0, example: "0, 1, 2" });
      const seen = new Set();
      for (const row of rows()) {
        const key = axisKey(row);
        const field = `grid.${key}`;
        if (!/^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$/.test(key)) errors[field] = `the field must be a dotted spec path such as dataset.options.num_samples; got ${JSON.stringify(key)}.`;
        else if (seen.has(key) || ownKey(key)) errors[field] = `${key} is swept once already; give all its values in one list.`;
        else check(field, row.querySelector("[name='axis.values']").value, choices[key]?.type ?? { kind: "json" });
        seen.add(key);
      }
      return errors;
    },
    /** The POST body (checked by `errors` first): the form's spec as the base, each ticked algorithm's params and model, and the grid. */
    request(form, spec, paramsBy) {
      const list = (name, type) => parseList(form.elements[name].value, type).values;
      const names = chosen(form).map((a) => a.name);
      // read from the privacy fieldset, which the spec leaves out when the shown algorithm is not private
      const privacy = { delta: Number(form.elements["privacy.delta"].value), accountant: form.elements["privacy.accountant"].value,
        calibration: form.elements["privacy.calibration"].value };
      const grid = { algorithm: names, [`privacy.${target(form)}`]: list(`sweep.privacy.${target(form)}`, { kind: "number" }), seed: list("sweep.seed", { kind: "integer" }) };
      for (const row of rows()) grid[axisKey(row)] = parseList(row.querySelector("[name='axis.values']").value, choices[axisKey(row)]?.type ?? { kind: "json" }).values;
      const byAlgorithm = { ...paramsBy, [spec.algorithm]: spec.params };
      const own = models(form, spec.model.name);
      const modelBy = Object.fromEntries(names.filter((n) => own[n] !== spec.model.name).map((n) => [n, { name: own[n] }]));
      const base = { ...spec, params: {}, privacy, params_by_algorithm: Object.fromEntries(names.filter((n) => Object.keys(byAlgorithm[n] ?? {}).length).map((n) => [n, byAlgorithm[n]])) };
      delete base.algorithm;  // the grid's algorithms
      delete base.seed;
      if (Object.keys(modelBy).length) base.model_by_algorithm = modelBy;
      return { name: form.elements["sweep.name"].value.trim(), base, grid };
    },
  };
}

/** How long `seconds` is, in words a plan is made with. */
const duration = (seconds) => (seconds < 90 ? `${Math.max(1, Math.round(seconds))} s` : seconds < 5400 ? `${Math.round(seconds / 60)} min` : `${fmt(seconds / 3600, 2)} h`);

/** Fills `projection` with a sweep preview (POST /api/sweeps/preview): runs, tasks and the time estimate. */
export function showPreview(projection, preview, datasetName) {
  const tasks = (a) => (a.tasks === a.runs ? (a.runs === 1 ? "alone" : "each alone") : `in ${a.tasks} batch${a.tasks === 1 ? "" : "es"}`);
  const missing = preview.algorithms.filter((a) => a.seconds_per_round === null).map((a) => a.algorithm);
  const estimate = preview.estimated_seconds !== null
    ? `estimated ${duration(preview.estimated_seconds)} of worker time, one task after another (from past runs here)`
    : `no time estimate: no past run of ${missing.join(", ")} on ${datasetName} here`;
  replace(projection,
    h("p", { class: "sweep-count" }, `${preview.num_runs} run${preview.num_runs === 1 ? "" : "s"} in ${preview.tasks} worker task${preview.tasks === 1 ? "" : "s"} · ${estimate}`),
    h("ul", { class: "sweep-algorithms" }, preview.algorithms.map((a) =>
      h("li", {}, `${a.algorithm} (${a.models.join(", ")}): ${a.runs} run${a.runs === 1 ? "" : "s"} ${tasks(a)}`,
        a.seconds_per_round !== null ? ` · ${fmt(a.seconds_per_round, 2)} s a round over its last ${a.past_runs} run${a.past_runs === 1 ? "" : "s"}` : ""))));
}
