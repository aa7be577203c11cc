// The run form's fields and how a spec is read back from them: one builder per kind of control,
// one reader for the whole spec, and the errors shown beside fields.
import { h } from "./dom.js";

/** A labelled field; `name` is the spec path its errors are reported under. */
export function field(label, name, control, hint) {
  return h("label", { class: "field", dataset: { field: name } }, h("span", {}, label), control,
    hint ? h("small", { class: "muted" }, hint) : null, h("small", { class: "error" }));
}

export const number = (name, value, attrs = {}) => h("input", { type: "number", name, value: value ?? "", step: "any", ...attrs });
/** A select of `options`: strings, or {value, text, disabled} where the shown text differs. */
export const select = (name, options, value) => h("select", { name },
  options.map((o) => (typeof o === "string" ? { value: o, text: o } : o)).map((o) =>
    h("option", { value: o.value, selected: o.value === value ? "" : null, disabled: o.disabled }, o.text ?? o.value)));

/** A registry option's JSON Schema with its `null` alternative dropped (blank means the default). */
const plain = (schema) => schema.anyOf?.find((s) => s.type !== "null") ?? schema;

/** The bounds of a number schema as input attributes, and as words for the hint ("≥ 1, ≤ 10"). */
function bounds(schema) {
  const attrs = {};
  if (schema.minimum !== undefined) attrs.min = schema.minimum;
  if (schema.exclusiveMinimum !== undefined) attrs.min = schema.exclusiveMinimum;
  if (schema.maximum !== undefined) attrs.max = schema.maximum;
  if (schema.type === "integer") attrs.step = 1;
  const words = [schema.exclusiveMinimum !== undefined ? `> ${attrs.min}` : attrs.min !== undefined ? `≥ ${attrs.min}` : "",
    attrs.max !== undefined ? `≤ ${attrs.max}` : ""].filter(Boolean).join(", ");
  return { attrs, words };
}

/**
 * The fields of a registry's kind options (GET /api/options: partition kinds, user kinds), one per
 * option name across all kinds, each shown only while the kind chosen in `kindName` takes it
 * (see showRelevant). Values come from `values` (a cloned spec's); a blank field is left out of
 * the spec, so the kind's own default applies: the placeholder says which.
 */
export function kindOptionFields(kindName, kinds, values, group) {
  const takers = {};
  for (const kind of kinds) for (const [option, schema] of Object.entries(kind.options)) (takers[option] ??= { schema, kinds: [] }).kinds.push(kind.name);
  return Object.entries(takers).map(([option, { schema, kinds: names }]) => {
    const name = `${kindName.replace(/\.kind$/, "")}.${option}`;
    const { attrs, words } = bounds(plain(schema));
    const placeholder = schema.default ?? "";
    const hint = [words, schema.default !== null && schema.default !== undefined ? `blank: ${schema.default}` : ""].filter(Boolean).join("; ");
    const el = field(`${(schema.title ?? option).toLowerCase()} (${group}: ${names.join(", ")})`, name,
      number(name, values?.[option], { ...attrs, placeholder }), hint);
    el.dataset.kindOf = kindName;
    el.dataset.kinds = names.join(" ");
    return el;
  });
}

/**
 * The inputs of an algorithm's params, filled from `values` (a cloned spec's params) or the
 * schema's defaults. With `values`, a param the clone did not set is marked so that readSpec
 * leaves it out while it keeps its default: a clone submitted unchanged is the same spec.
 */
export function paramInputs(algorithm, values) {
  const props = algorithm.params_schema?.properties ?? {};
  const fields = Object.entries(props).map(([key, schema]) => {
    const label = `${key}${schema.description ? ` (${schema.description})` : ""}`;
    const value = values?.[key] ?? schema.default;
    if (schema.enum || schema.const !== undefined || schema.type === "boolean") {
      const options = schema.enum ?? (schema.const !== undefined ? [schema.const] : ["true", "false"]);
      return field(label, `params.${key}`, select(`params.${key}`, options, String(value)));
    }
    if (schema.anyOf) {  // e.g. a number or one of a few words: typed as text, read back by readParam
      const words = schema.anyOf.flatMap((s) => s.enum ?? []);
      return field(label, `params.${key}`, h("input", { type: "text", name: `params.${key}`, value: value ?? "" }),
        `a number${words.length ? ` or one of ${words.join(", ")}` : ""}`);
    }
    const { attrs, words } = bounds(schema);
    // blank means the default, and says so
    const blank = schema.default !== undefined && schema.default !== null ? `blank: ${schema.default}` : "";
    return field(label, `params.${key}`, number(`params.${key}`, value, { ...attrs, placeholder: schema.default ?? "" }),
      [words, blank].filter(Boolean).join("; "));
  });
  if (values) {
    for (const el of fields) {
      const input = el.querySelector("[name^='params.']");
      if (!(input.name.slice("params.".length) in values)) input.dataset.unsetDefault = String(props[input.name.slice("params.".length)].default);
    }
  }
  return fields;
}

/** A form value as its schema's type: booleans and words stay what they are, numbers become numbers. */
function readParam(raw, schema) {
  if (schema.type === "boolean") return raw === "true";
  if (schema.enum || schema.const !== undefined) return raw;
  if (schema.anyOf) return raw.trim() !== "" && !Number.isNaN(Number(raw)) ? Number(raw) : raw.trim();
  return Number(raw);
}

/** The name user kinds have for "no users" (record-level data): the spec then has no `dataset.users`. */
export const NO_USERS = "none";

/** Whether the field of input `name` is shown (readSpec reads shown fields only). */
const shown = (form, name) => { const input = form.elements[name]; return Boolean(input) && !input.closest("[hidden]"); };

/**
 * Shows the fields that matter for the form as filled and hides the others: a kind's options
 * only for the kind that takes them, hidden layers only for a model that takes them, the privacy
 * fieldset only for a private algorithm, and of ε, σ and μ only the chosen target's box.
 * `catalogue` is GET /api/options.
 */
export function showRelevant(form, algorithm, catalogue) {
  const v = (name) => form.elements[name]?.value ?? "";
  const show = (name, on) => { const el = form.querySelector(`.field[data-field="${name}"]`); if (el) el.hidden = !on; };
  for (const el of form.querySelectorAll(".field[data-kind-of]")) el.hidden = !el.dataset.kinds.split(" ").includes(v(el.dataset.kindOf));
  show("model.hidden", Boolean(catalogue.models.find((m) => m.name === v("model.name"))?.takes_hidden));
  form.querySelector("fieldset.privacy").hidden = !algorithm?.private;
  const target = form.querySelector("input[name=target]:checked")?.value ?? "epsilon";
  for (const name of ["epsilon", "noise_multiplier", "mu"]) show(`privacy.${name}`, target === name);
}

/** Returns the params the form's inputs give for `algorithm` (those it shows); a blank or a clone's unset default is left out. */
export function readParams(form, algorithm) {
  const params = {};
  for (const [key, schema] of Object.entries(algorithm?.params_schema?.properties ?? {})) {
    const input = form.elements[`params.${key}`];
    if (!input || input.value === "" || input.dataset.unsetDefault === input.value) continue;
    params[key] = readParam(input.value, schema);
  }
  return params;
}

/** Returns the spec the form describes (the advanced box aside: see spec-fragment.js); hidden fields are left out. */
export function readSpec(form, algorithms) {
  const v = (name) => form.elements[name]?.value ?? "";
  const num = (name) => (v(name) === "" ? undefined : Number(v(name)));
  const algorithm = algorithms.find((a) => a.name === v("algorithm"));
  const params = readParams(form, algorithm);
  /** The shown, filled options of the kind chosen in `<prefix>.kind`, as numbers. */
  const kindOptions = (prefix) => {
    const out = { kind: v(`${prefix}.kind`) };
    for (const input of form.querySelectorAll(`[name^='${prefix}.']:not([name='${prefix}.kind'])`)) {
      if (shown(form, input.name) && input.value !== "") out[input.name.slice(prefix.length + 1)] = Number(input.value);
    }
    return out;
  };
  // an upload is named through the csv loader (its option marks it: datasets.js)
  const upload = form.elements["dataset.name"]?.selectedOptions[0]?.dataset.upload !== undefined;
  const dataset = upload ? { name: "csv", options: { upload: v("dataset.name") } } : { name: v("dataset.name") };
  Object.assign(dataset, { silos: num("dataset.silos"), partition: kindOptions("dataset.partition") });
  if (v("dataset.features.pca") !== "") dataset.features = { pca: num("dataset.features.pca") };
  if (v("dataset.users.kind") !== NO_USERS && v("dataset.users.kind") !== "") {
    dataset.users = kindOptions("dataset.users");
    // users' records are dealt to silos by the Zipf law instead of the partition
    if (dataset.users.silo_alpha !== undefined) delete dataset.partition;
  }
  const model = { name: v("model.name") };
  if (shown(form, "model.hidden") && v("model.hidden").trim() !== "") model.hidden = hiddenLayers(v("model.hidden"));
  const spec = { algorithm: v("algorithm"), params, dataset, model, rounds: num("rounds"), eval_every: num("eval_every"), seed: num("seed") };
  if (v("participation") !== "") spec.participation = num("participation");
  if (algorithm?.private) {
    const target = form.querySelector("input[name=target]:checked")?.value ?? "epsilon";
    spec.privacy = { delta: num("privacy.delta"), accountant: v("privacy.accountant"), calibration: v("privacy.calibration") };
    spec.privacy[target] = num(`privacy.${target}`);
  }
  return spec;
}

/** The mlp's hidden layer widths typed as "64, 32"; `null` when they are not positive integers. */
export function hiddenLayers(text) {
  const parts = text.split(",").map((s) => s.trim()).filter(Boolean);
  return parts.every((s) => /^[1-9]\d*$/.test(s)) ? parts.map(Number) : null;
}

/**
 * Errors the browser finds before asking the API, as {"field.path": "message"}: values that
 * JSON cannot carry (a NaN would be sent as null).
 */
export function formErrors(form) {
  const errors = {};
  // a blank privacy target is no default: the spec needs one of ε, σ and μ
  const target = form.querySelector("input[name=target]:checked")?.value;
  if (target && shown(form, `privacy.${target}`) && form.elements[`privacy.${target}`].value.trim() === "") {
    errors[`privacy.${target}`] = `is blank; give ${{ epsilon: "ε", noise_multiplier: "σ", mu: "μ" }[target]}, or choose another target above.`;
  }
  const hidden = form.elements["model.hidden"];
  if (shown(form, "model.hidden") && hiddenLayers(hidden.value) === null) {
    errors["model.hidden"] = `hidden layers must be positive integers separated by commas, e.g. 64, 32; got ${JSON.stringify(hidden.value)}.`;
  }
  return errors;
}

/** Clears the error shown beside the field that holds `input` (the user is fixing it). */
export function clearError(input) {
  const el = input.closest?.(".field[data-field]");
  if (!el) return;
  el.classList.remove("invalid");
  el.querySelector(".error").textContent = "";
}

/**
 * Where the message of spec field `name` is shown: its own field, else the first shown field
 * inside it (`privacy` → the chosen target's box, `dataset.features` → the PCA box).
 */
function placeOf(form, name) {
  if (form.querySelector(`.field[data-field="${CSS.escape(name)}"]`)) return name;
  const inner = [...form.querySelectorAll(".field[data-field]")].find((el) => el.dataset.field.startsWith(`${name}.`) && !el.closest("[hidden]"));
  return inner?.dataset.field ?? name;
}

/**
 * Shows each message beside its field (or the shown field inside it: `placeOf`) and clears the
 * others; returns the messages no field shows, as one line.
 */
export function showErrors(form, fields) {
  const placed = {};
  for (const [name, message] of Object.entries(fields)) {
    const at = placeOf(form, name);
    placed[at] = placed[at] ? `${placed[at]} ${message}` : message;
  }
  fields = placed;
  for (const el of form.querySelectorAll(".field[data-field]")) {
    const message = fields[el.dataset.field];
    if (message) el.closest("details")?.setAttribute("open", "");  // a folded field's error is seen
    el.classList.toggle("invalid", Boolean(message));
    el.querySelector(".error").textContent = message ?? "";
  }
  const unplaced = Object.entries(fields).filter(([name]) => !form.querySelector(`.field[data-field="${CSS.escape(name)}"]`));
  return unplaced.map(([name, msg]) => `${name}: ${msg}`).join("; ");
}

