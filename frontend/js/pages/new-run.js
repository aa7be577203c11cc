// New run / new sweep: a form generated from the algorithm's params JSON Schema, with the
// projected ε (or calibrated σ) updated as the form changes, and API errors beside fields.
import { ApiError, api } from "../api.js";
import { draw } from "../charts.js";
import { banner, fmt, h, replace } from "../dom.js";
import { current, go } from "../state.js";

const PARTITIONS = ["iid", "dirichlet", "shards", "pairs", "natural", "quantity"];
const MODELS = ["mlp", "logreg", "cnn", "lenet"];
const ACCOUNTANTS = ["rdp", "pld", "gdp"];
const EPS_MIN = 0.1, EPS_MAX = 100;

const sliderToEps = (v) => Number((EPS_MIN * (EPS_MAX / EPS_MIN) ** (v / 1000)).toPrecision(3));
const epsToSlider = (e) => Math.round((1000 * Math.log(e / EPS_MIN)) / Math.log(EPS_MAX / EPS_MIN));

/** A labelled field; `name` is the spec path its errors are reported under. */
function field(label, name, control, hint) {
  return h("label", { class: "field", dataset: { field: name } }, h("span", {}, label), control,
    hint ? h("small", { class: "muted" }, hint) : null, h("small", { class: "error" }));
}

const number = (name, value, attrs = {}) => h("input", { type: "number", name, value: value ?? "", step: "any", ...attrs });
const select = (name, options, value) => h("select", { name },
  options.map((o) => h("option", { value: o, selected: o === value ? "" : null }, o)));

function paramInputs(algorithm, values) {
  const props = algorithm.params_schema?.properties ?? {};
  return Object.entries(props).map(([key, schema]) => {
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
}

/** A form value as its schema's type: booleans and words stay what they are, numbers become numbers. */
function readParam(raw, schema) {
  if (schema.type === "boolean") return raw === "true";
  if (schema.enum || schema.const !== undefined) return raw;
  if (schema.anyOf) return raw.trim() !== "" && !Number.isNaN(Number(raw)) ? Number(raw) : raw.trim();
  return Number(raw);
}

const USER_KINDS = ["none", "uniform", "balanced", "zipf", "natural"];

function readSpec(form, algorithms) {
  const v = (name) => form.elements[name]?.value ?? "";
  const num = (name) => (v(name) === "" ? undefined : Number(v(name)));
  const algorithm = algorithms.find((a) => a.name === v("algorithm"));
  const params = {};
  for (const [key, schema] of Object.entries(algorithm?.params_schema?.properties ?? {})) {
    if (v(`params.${key}`) !== "") params[key] = readParam(v(`params.${key}`), schema);
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
  if (model.name === "mlp") model.hidden = v("model.hidden").split(",").map((s) => s.trim()).filter(Boolean).map(Number);
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

/** Clears the error shown beside the field that holds `input` (the user is fixing it). */
function clearError(input) {
  const el = input.closest?.(".field[data-field]");
  if (!el) return;
  el.classList.remove("invalid");
  el.querySelector(".error").textContent = "";
}

function showErrors(form, fields) {
  for (const el of form.querySelectorAll(".field[data-field]")) {
    const message = fields[el.dataset.field];
    el.classList.toggle("invalid", Boolean(message));
    el.querySelector(".error").textContent = message ?? "";
  }
  const unplaced = Object.entries(fields).filter(([name]) => !form.querySelector(`.field[data-field="${CSS.escape(name)}"]`));
  return unplaced.map(([name, msg]) => `${name}: ${msg}`).join("; ");
}

export async function render(root, { params }) {
  const [algorithms, { datasets }] = await Promise.all([api.algorithms(), api.datasets()]);
  const base = params.from ? await api.spec(params.from) : null;
  const initial = base ?? { algorithm: "isrl_mbsgd", dataset: { name: "digits", silos: 10, partition: { kind: "iid" } },
    model: { name: "mlp", hidden: [64] }, rounds: 20, eval_every: 5, seed: 0, privacy: { epsilon: 3, delta: 1e-5, accountant: "rdp" } };
  const sweepMode = current().params.mode === "sweep";
  const about = h("p", { class: "muted about" });
  const paramBox = h("div");
  const projection = h("div", { class: "projection", "aria-live": "polite" }, "…");
  const partitionChart = h("div", { class: "chart small", id: "chart-partition-preview" });
  const privacyBox = h("fieldset", { class: "privacy" });
  const eps0 = initial.privacy?.epsilon ?? 3;
  const epsLabel = h("strong", { class: "eps-value" }, `ε = ${eps0}`);
  const epsInput = h("input", { type: "hidden", name: "privacy.epsilon", value: eps0 });
  const slider = h("input", { type: "range", min: 0, max: 1000, value: epsToSlider(eps0), name: "epsilon-slider", "aria-label": "ε (log scale)",
    oninput: (e) => { const eps = sliderToEps(Number(e.target.value)); epsInput.value = eps; epsLabel.textContent = `ε = ${eps}`; changed(); } });
  const target = initial.privacy?.noise_multiplier ? "noise_multiplier" : initial.privacy?.mu ? "mu" : "epsilon";

  replace(privacyBox, h("legend", {}, "Privacy"),
    h("div", { class: "field" }, h("span", {}, "target"),
      h("label", {}, h("input", { type: "radio", name: "target", value: "epsilon", checked: target === "epsilon", onchange: () => changed() }), " ε (σ is calibrated)"),
      h("label", {}, h("input", { type: "radio", name: "target", value: "noise_multiplier", checked: target === "noise_multiplier", onchange: () => changed() }), " noise multiplier (ε is projected)"),
      h("label", {}, h("input", { type: "radio", name: "target", value: "mu", checked: target === "mu",
        onchange: (e) => { e.target.form.elements["privacy.accountant"].value = "gdp"; changed(); } }), " μ (Gaussian DP)")),
    field("ε, log scale from 0.1 to 100", "privacy.epsilon",
      h("div", {}, h("div", { class: "slider" }, h("span", {}, "better privacy"), slider, h("span", {}, "better accuracy")), epsLabel, epsInput)),
    field("noise multiplier σ", "privacy.noise_multiplier", number("privacy.noise_multiplier", initial.privacy?.noise_multiplier ?? 1.0, { min: 0 })),
    field("μ (μ-GDP target)", "privacy.mu", number("privacy.mu", initial.privacy?.mu ?? 1.0, { min: 0 })),
    field("δ", "privacy.delta", number("privacy.delta", initial.privacy?.delta ?? 1e-5, { min: 0, max: 1 })),
    field("accountant", "privacy.accountant", select("privacy.accountant", ACCOUNTANTS, initial.privacy?.accountant ?? "rdp")),
    field("calibration", "privacy.calibration", select("privacy.calibration", ["accountant", "paper"], initial.privacy?.calibration ?? "accountant"),
      "paper: the paper's closed-form noise; the ledger still reports the true ε"));

  const sweepBox = h("fieldset", { class: "sweep", hidden: !sweepMode }, h("legend", {}, "Sweep"),
    field("ε values (comma-separated)", "grid.privacy.epsilon", h("input", { name: "sweep.epsilons", value: "0.5, 1, 2, 4, 8" })),
    field("algorithms", "grid.algorithm", h("div", {}, algorithms.map((a) => h("label", { style: "margin-right:10px" },
      h("input", { type: "checkbox", name: "sweep.algorithms", value: a.name, checked: a.name === initial.algorithm || a.name === "fedavg" }), ` ${a.name}`)))),
    field("seeds (comma-separated)", "grid.seed", h("input", { name: "sweep.seeds", value: "0, 1, 2" })));

  const form = h("form", { class: "spec", novalidate: true, onsubmit: (e) => { e.preventDefault(); submit(); }, oninput: (e) => { clearError(e.target); changed(); }, onchange: () => changed() },
    h("div", {},
      h("fieldset", {}, h("legend", {}, "Algorithm"),
        field("algorithm", "algorithm", h("select", { name: "algorithm", onchange: () => { renderParams(); } },
          algorithms.map((a) => h("option", { value: a.name, selected: a.name === initial.algorithm ? "" : null }, a.name)))),
        about, paramBox),
      h("fieldset", {}, h("legend", {}, "Data and model"),
        field("dataset", "dataset.name", select("dataset.name", datasets.filter((d) => d.available).map((d) => d.name), initial.dataset.name)),
        field("silos", "dataset.silos", number("dataset.silos", initial.dataset.silos, { min: 1, step: 1 })),
        field("partition", "dataset.partition.kind", select("dataset.partition.kind", PARTITIONS, initial.dataset.partition?.kind ?? "iid")),
        field("Dirichlet α (dirichlet, quantity)", "dataset.partition.alpha", number("dataset.partition.alpha", initial.dataset.partition?.alpha ?? 0.5, { min: 0 })),
        field("labels per silo (shards)", "dataset.partition.labels_per_silo", number("dataset.partition.labels_per_silo", initial.dataset.partition?.labels_per_silo ?? 2, { min: 1, step: 1 })),
        field("PCA components (blank: none)", "dataset.features.pca", number("dataset.features.pca", initial.dataset.features?.pca, { min: 1, step: 1 })),
        field("users (user-level DP: who owns each record)", "dataset.users.kind", select("dataset.users.kind", USER_KINDS, initial.dataset.users?.kind ?? "none")),
        field("number of users", "dataset.users.count", number("dataset.users.count", initial.dataset.users?.count ?? 100, { min: 1, step: 1 })),
        field("Zipf exponent over silos (blank: silos from the partition)", "dataset.users.silo_alpha", number("dataset.users.silo_alpha", initial.dataset.users?.silo_alpha, { min: 0 })),
        field("model", "model.name", select("model.name", MODELS, initial.model?.name ?? "mlp")),
        field("hidden layers (mlp)", "model.hidden", h("input", { name: "model.hidden", value: (initial.model?.hidden ?? [64]).join(", ") })),
        field("rounds", "rounds", number("rounds", initial.rounds, { min: 1, step: 1 })),
        field("silos per round (blank: all)", "participation", number("participation", initial.participation, { min: 1, step: 1 })),
        field("evaluate every", "eval_every", number("eval_every", initial.eval_every ?? 1, { min: 1, step: 1 })),
        field("seed", "seed", number("seed", initial.seed ?? 0, { min: 0, step: 1 }))),
    ),
    h("div", {}, privacyBox, sweepBox, h("h2", {}, "Before it runs"), projection, partitionChart,
      h("p", {}, h("button", { type: "submit", class: "primary" }, sweepMode ? "Start sweep" : "Start run"), " ",
        h("a", { href: sweepMode ? "#/new" : "#/new?mode=sweep" }, sweepMode ? "single run instead" : "sweep instead"))));

  function renderParams() {
    const algorithm = algorithms.find((a) => a.name === form.elements.algorithm.value);
    about.textContent = `${algorithm.summary} · privacy: ${algorithm.notion} · paper: ${algorithm.paper}`;
    const same = base && base.algorithm === algorithm.name ? base.params : null;
    replace(paramBox, paramInputs(algorithm, same));
    privacyBox.hidden = !algorithm.private;
    changed();
  }

  let timer = null;
  let seq = 0;
  function changed() {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      const mine = ++seq;
      const spec = readSpec(form, algorithms);
      try {
        const p = await api.project(spec);
        if (mine !== seq) return;
        const parts = p.notion === "none" ? ["not private: no ε is spent"]
          : [`σ = ${fmt(p.noise_multiplier?.length ? Math.max(...p.noise_multiplier) : p.noise_multiplier, 4)}`,
             `projected ε = ${fmt(p.epsilon, 4)} at δ = ${p.delta} (${p.accountant}, ${p.notion}-level)`];
        if (p.budget !== null && p.budget !== undefined) parts.push(`budget: this run needs ${fmt(p.epsilon)} of ${fmt(p.budget)} remaining on ${spec.dataset.name}`);
        projection.textContent = parts.join(" · ");
        projection.dataset.noiseMultiplier = JSON.stringify(p.noise_multiplier);
        if (p.partition_figure) draw(partitionChart, p.partition_figure);
      } catch (err) {
        if (mine !== seq) return;
        projection.textContent = `Cannot project: ${err instanceof ApiError && err.status === 422 ? showErrors(form, err.fields) || "see the fields marked" : err.message}`;
      }
    }, 300);
  }

  async function submit() {
    const spec = readSpec(form, algorithms);
    banner(null);
    try {
      if (!sweepMode) {
        const run = await api.createRun(spec);
        go(`runs/${run.id}`);
        return;
      }
      const list = (name) => form.elements[name].value.split(",").map((s) => s.trim()).filter(Boolean).map(Number);
      const grid = { algorithm: [...form.querySelectorAll("input[name='sweep.algorithms']:checked")].map((b) => b.value),
        "privacy.epsilon": list("sweep.epsilons"), seed: list("sweep.seeds") };
      // The form's params belong to the chosen algorithm; the sweep's other algorithms keep their defaults.
      const base = { ...spec, params: {}, params_by_algorithm: { [spec.algorithm]: spec.params },
        privacy: spec.privacy ?? { epsilon: 1, delta: 1e-5 } };
      const sweep = await api.createSweep({ base, grid });
      go("compare", { sweep: sweep.id });
    } catch (err) {
      if (err instanceof ApiError && err.status === 422) {
        const fields = Object.fromEntries(Object.entries(err.fields).map(([k, m]) =>
          [k.replace(/^base\./, "").replace(/^params_by_algorithm\.[^.]+\./, "params."), m]));
        const rest = showErrors(form, fields);
        banner(`Could not start ${sweepMode ? "sweep" : "run"}: ${rest || "see the fields marked in red"}`);
      } else {
        banner(`Could not start ${sweepMode ? "sweep" : "run"}: ${err.message}`);
      }
    }
  }

  replace(root, h("h1", {}, sweepMode ? "New sweep" : (base ? `New run (from ${params.from})` : "New run")), form);
  renderParams();
}
