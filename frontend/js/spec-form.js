// The run form's fields and how a spec is read back from them: one builder per kind of control,
// one reader for the whole spec, and the errors shown beside fields.
import { h } from "./dom.js";

/** A labelled field; `name` is the spec path its errors are reported under. */
export function field(label, name, control, hint) {
  return h("label", { class: "field", dataset: { field: name } }, h("span", {}, label), control,
    hint ? h("small", { class: "muted" }, hint) : null, h("small", { class: "error" }));
}

export const number = (name, value, attrs = {}) => h("input", { type: "number", name, value: value ?? "", step: "any", ...attrs });
export const select = (name, options, value) => h("select", { name },
  options.map((o) => h("option", { value: o, selected: o === value ? "" : null }, o)));

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
    const attrs = {};
    if (schema.minimum !== undefined) attrs.min = schema.minimum;
    if (schema.exclusiveMinimum !== undefined) attrs.min = schema.exclusiveMinimum;
    if (schema.maximum !== undefined) attrs.max = schema.maximum;
    if (schema.type === "integer") attrs.step = 1;
    const range = [attrs.min !== undefined ? `≥ ${attrs.min}` : "", attrs.max !== undefined ? `≤ ${attrs.max}` : ""].filter(Boolean).join(", ");
    return field(label, `params.${key}`, number(`params.${key}`, value, attrs), range);
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

export const USER_KINDS = ["none", "uniform", "balanced", "zipf", "natural"];

/** Returns the spec the form describes (the advanced box aside: see spec-fragment.js). */
export function readSpec(form, algorithms) {
  const v = (name) => form.elements[name]?.value ?? "";
  const num = (name) => (v(name) === "" ? undefined : Number(v(name)));
  const algorithm = algorithms.find((a) => a.name === v("algorithm"));
  const params = {};
  for (const [key, schema] of Object.entries(algorithm?.params_schema?.properties ?? {})) {
    const input = form.elements[`params.${key}`];
    if (v(`params.${key}`) === "" || input?.dataset.unsetDefault === v(`params.${key}`)) continue;
    params[key] = readParam(v(`params.${key}`), schema);
  }
  const partition = { kind: v("dataset.partition.kind") };
  if (["dirichlet", "quantity"].includes(partition.kind) && v("dataset.partition.alpha") !== "") partition.alpha = num("dataset.partition.alpha");
  if (partition.kind === "shards" && v("dataset.partition.labels_per_silo") !== "") partition.labels_per_silo = num("dataset.partition.labels_per_silo");
  const dataset = { name: v("dataset.name"), silos: num("dataset.silos"), partition };
  if (v("dataset.features.pca") !== "") dataset.features = { pca: num("dataset.features.pca") };
  if (v("dataset.users.kind") !== "none" && v("dataset.users.kind") !== "") {
    dataset.users = { kind: v("dataset.users.kind") };
    if (dataset.users.kind !== "natural") dataset.users.count = num("dataset.users.count");
    if (v("dataset.users.silo_alpha") !== "" && dataset.users.kind !== "natural") {
      dataset.users.silo_alpha = num("dataset.users.silo_alpha");
      delete dataset.partition;  // users' records are dealt to silos by the Zipf law instead
    }
  }
  const model = { name: v("model.name") };
  if (model.name === "mlp") model.hidden = hiddenLayers(v("model.hidden"));
  const spec = { algorithm: v("algorithm"), params, dataset, model, rounds: num("rounds"), eval_every: num("eval_every"), seed: num("seed") };
  if (v("participation") !== "") spec.participation = num("participation");
  if (algorithm?.private) {
    const target = form.querySelector("input[name=target]:checked")?.value ?? "epsilon";
    spec.privacy = { delta: num("privacy.delta"), accountant: v("privacy.accountant"), calibration: v("privacy.calibration") };
    if (target === "epsilon") spec.privacy.epsilon = num("privacy.epsilon");
    else if (target === "mu") spec.privacy.mu = num("privacy.mu");
    else spec.privacy.noise_multiplier = num("privacy.noise_multiplier");
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
  const hidden = form.elements["model.hidden"];
  if (form.elements["model.name"]?.value === "mlp" && hidden && hiddenLayers(hidden.value) === null) {
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
 * Shows each message beside its field (and clears the others); returns the messages no field
 * shows, as one line.
 */
export function showErrors(form, fields) {
  for (const el of form.querySelectorAll(".field[data-field]")) {
    const message = fields[el.dataset.field];
    el.classList.toggle("invalid", Boolean(message));
    el.querySelector(".error").textContent = message ?? "";
  }
  const unplaced = Object.entries(fields).filter(([name]) => !form.querySelector(`.field[data-field="${CSS.escape(name)}"]`));
  return unplaced.map(([name, msg]) => `${name}: ${msg}`).join("; ");
}

