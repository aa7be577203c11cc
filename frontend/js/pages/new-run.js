// New run / new sweep: a form generated from the algorithm's params JSON Schema, with the
// projected ε (or calibrated σ) updated as the form changes, and errors beside fields and
// beside the submit button.
import { ApiError, api } from "../api.js";
import { draw } from "../charts.js";
import { datasetChoices, datasetOption, uploadChoice, uploadPanel } from "../datasets.js";
import { deltaText, fmt, h, replace, setTitle } from "../dom.js";
import { clearError, field, formErrors, kindOptionFields, NO_USERS, number, paramInputs, readParams, readSpec, select, showErrors, showRelevant } from "../spec-form.js";
import { merge, parseFragment, unmodelled } from "../spec-fragment.js";
import { showPreview, sweepSection } from "../sweep-form.js";
import { current, go } from "../state.js";

const EPS_MIN = 0.1, EPS_MAX = 100;
const DEFAULT_SPEC = { algorithm: "isrl_mbsgd", dataset: { name: "digits", silos: 10, partition: { kind: "iid" } },
  model: { name: "mlp", hidden: [64] }, rounds: 20, eval_every: 5, seed: 0, privacy: { epsilon: 3, delta: 1e-5, accountant: "rdp" } };

const sliderToEps = (v) => Number((EPS_MIN * (EPS_MAX / EPS_MIN) ** (v / 1000)).toPrecision(3));
const epsToSlider = (e) => Math.min(1000, Math.max(0, Math.round((1000 * Math.log(e / EPS_MIN)) / Math.log(EPS_MAX / EPS_MIN))));

/**
 * The accountants as select options, marked by when they may give the headline ε: one that never
 * may (data-dependent, e.g. pate) is listed but cannot be chosen; one that may for some plans only
 * (e.g. gdp) says so, and the server names `privacy.accountant` when the plan is not one of them.
 */
const accountantOptions = (accountants) => accountants.map((a) => ({
  value: a.name,
  text: a.headline_always ? a.name : a.data_dependent ? `${a.name} (never a headline: data-dependent)` : `${a.name} (only for plans it accounts exactly)`,
  disabled: a.data_dependent,
}));

/** The privacy fieldset: target, ε (a number box and a log-scale slider kept in sync), σ, μ, δ. */
function privacyFields(privacy, catalogue, changed) {
  const eps0 = privacy?.epsilon ?? 3;
  const epsBox = number("privacy.epsilon", eps0, { min: 0, max: 1000, class: "eps-number" });
  // the slider is the mouse's way to ε; the keyboard's is the box beside it, so Tab passes it by
  const slider = h("input", { type: "range", min: 0, max: 1000, value: epsToSlider(eps0), name: "epsilon-slider", "aria-label": "ε on a log scale", tabindex: -1,
    oninput: (e) => { epsBox.value = sliderToEps(Number(e.target.value)); clearError(epsBox); } });
  // the box is exact (8 is 8); the slider follows it as near as its steps allow
  epsBox.addEventListener("input", () => { if (Number(epsBox.value) > 0) slider.value = epsToSlider(Number(epsBox.value)); });
  const target = privacy?.noise_multiplier ? "noise_multiplier" : privacy?.mu ? "mu" : "epsilon";
  const radio = (value, text, onchange) => h("label", {}, h("input", { type: "radio", name: "target", value, checked: target === value, onchange }), text);
  return h("fieldset", { class: "privacy" }, h("legend", {}, "Privacy"),
    h("fieldset", { class: "field targets" }, h("legend", {}, "target"),
      radio("epsilon", " ε (σ is calibrated)", () => changed()),
      radio("noise_multiplier", " noise multiplier (ε is projected)", () => changed()),
      radio("mu", " μ (Gaussian DP)", (e) => { e.target.form.elements["privacy.accountant"].value = "gdp"; changed(); })),
    field("ε (the slider is log-scale, 0.1 to 100)", "privacy.epsilon",
      h("div", { class: "slider" }, epsBox, h("span", { "aria-hidden": "true" }, "better privacy"), slider, h("span", { "aria-hidden": "true" }, "better accuracy"))),
    field("noise multiplier σ", "privacy.noise_multiplier", number("privacy.noise_multiplier", privacy?.noise_multiplier ?? 1.0, { min: 0 })),
    field("μ (μ-GDP target)", "privacy.mu", number("privacy.mu", privacy?.mu ?? 1.0, { min: 0 })),
    field("δ", "privacy.delta", number("privacy.delta", privacy?.delta ?? 1e-5, { min: 0, max: 1 })),
    field("accountant", "privacy.accountant", select("privacy.accountant", accountantOptions(catalogue.accountants), privacy?.accountant ?? catalogue.default_accountant)),
    field("calibration", "privacy.calibration", select("privacy.calibration", catalogue.calibrations, privacy?.calibration ?? catalogue.calibrations[0]),
      "paper: the paper's closed-form noise; the ledger still reports the true ε"));
}

/**
 * The data and model fieldset; its names and options are the registries' (GET /api/options), its
 * datasets those here and the uploads, and an upload panel adds one (`uploaded(upload)`).
 */
function dataFields(initial, catalogueOfData, catalogue, uploaded) {
  const { dataset, model } = initial;
  const users = dataset.users ?? null;
  const chosen = dataset.name === "csv" && dataset.options?.upload ? dataset.options.upload : dataset.name;
  const choices = datasetChoices(catalogueOfData);
  // a clone of a spec that reads a path through the csv loader keeps it (its path is in the advanced box)
  if (!choices.some((c) => c.value === chosen)) choices.push({ value: chosen, text: chosen, upload: false });
  return h("fieldset", {}, h("legend", {}, "Data and model"),
    field("dataset", "dataset.name", h("select", { name: "dataset.name" }, choices.map((c) => datasetOption(c, c.value === chosen)))),
    uploadPanel(uploaded),
    field("silos", "dataset.silos", number("dataset.silos", dataset.silos, { min: 1, step: 1, placeholder: catalogue.spec_defaults["dataset.silos"] }), blankMeans(catalogue, "dataset.silos")),
    field("partition", "dataset.partition.kind", select("dataset.partition.kind", catalogue.partition_kinds.map((k) => k.name), dataset.partition?.kind ?? "iid")),
    kindOptionFields("dataset.partition.kind", catalogue.partition_kinds, dataset.partition, "partition"),
    field("users (user-level DP: who owns each record)", "dataset.users.kind",
      select("dataset.users.kind", [NO_USERS, ...catalogue.user_kinds.map((k) => k.name)], users?.kind ?? NO_USERS)),
    // allocated users need a count: 100 unless the clone says otherwise
    kindOptionFields("dataset.users.kind", catalogue.user_kinds, { count: 100, ...users }, "users"),
    field("model", "model.name", select("model.name", catalogue.models.map((m) => m.name), model?.name ?? "mlp")),
    field("hidden layers", "model.hidden", h("input", { name: "model.hidden", value: (model?.hidden ?? []).join(", "),
      placeholder: (catalogue.models.find((m) => m.takes_hidden)?.options.hidden ?? []).join(", ") }), "widths separated by commas; blank: the model's default"),
    field("rounds", "rounds", number("rounds", initial.rounds, { min: 1, step: 1, placeholder: catalogue.spec_defaults.rounds }), blankMeans(catalogue, "rounds")),
    field("evaluate every", "eval_every", number("eval_every", initial.eval_every, { min: 1, step: 1, placeholder: "auto: ≤ 20 times" })),
    moreSettings("More: PCA, silos per round, seed", [dataset.features?.pca, initial.participation].some((v) => v !== undefined && v !== null) || Boolean(initial.seed),
      field("PCA components (blank: none)", "dataset.features.pca", number("dataset.features.pca", dataset.features?.pca, { min: 1, step: 1 })),
      field("silos per round (blank: all)", "participation", number("participation", initial.participation, { min: 1, step: 1 })),
      field("seed", "seed", number("seed", initial.seed ?? 0, { min: 0, step: 1 }))));
}

/**
 * Fields most runs leave as they are, folded away (a keyboard passes them with one Tab); open when
 * `open` (a clone that sets one) and whenever one of them is marked invalid (`showErrors`).
 */
function moreSettings(title, open, ...fields) {
  return h("details", { class: "more-settings", open: open ? "" : null }, h("summary", {}, title), ...fields);
}

/** "blank: 20": what a blank box of spec field `name` means (GET /api/options' spec_defaults). */
const blankMeans = (catalogue, name) => `blank: ${catalogue.spec_defaults[name]}`;

/**
 * Moves the model, dataset and users to ones `algorithm` accepts (the others are disabled in
 * their selects); returns a sentence per change, for the user.
 */
function fitTo(form, algorithm) {
  const notes = [];
  const needs = (names) => (names.length === 1 ? "needs it" : `takes only ${names.join(", ")}`);
  // an upload runs through the csv loader: it is accepted where csv is
  const loader = (option) => (option.dataset.upload !== undefined ? "csv" : option.value);
  for (const [name, noun, accepted] of [["model.name", "model", algorithm.models], ["dataset.name", "dataset", algorithm.datasets]]) {
    const input = form.elements[name];
    for (const option of input.options) option.disabled = !accepted.includes(loader(option));
    if (!input.selectedOptions[0] || accepted.includes(loader(input.selectedOptions[0]))) continue;
    const first = accepted.find((n) => [...input.options].some((o) => o.value === n));
    if (first === undefined) continue;  // none of its datasets is available here: the projection says why
    input.value = first;
    notes.push(`${noun} switched to ${first}: ${algorithm.name} ${needs(accepted)}`);
  }
  const users = form.elements["dataset.users.kind"];
  users.querySelector(`option[value="${NO_USERS}"]`).disabled = algorithm.requires_users;
  if (algorithm.requires_users && users.value === NO_USERS) {
    users.value = "uniform";
    if (form.elements["dataset.users.count"].value === "") form.elements["dataset.users.count"].value = 100;
    notes.push(`users set to uniform (${form.elements["dataset.users.count"].value} users): ${algorithm.name} needs users`);
  }
  return notes;
}

/**
 * The kinds' option defaults where a spec stores them (e.g. users' zipf_alpha 0.5 for every user
 * kind), shaped as the spec: a clone's value equal to one is no field of its own, so it does not
 * go to the advanced box, where it would override what the user types later.
 */
function kindDefaults(catalogue) {
  const defaults = (kinds) => Object.fromEntries(kinds.flatMap((k) => Object.entries(k.options))
    .filter(([, schema]) => schema.default !== null && schema.default !== undefined).map(([option, schema]) => [option, schema.default]));
  return { dataset: { partition: defaults(catalogue.partition_kinds), users: defaults(catalogue.user_kinds) } };
}

/** The page's elements that its handlers fill: notes, the params box, the projection, the advanced box, the submit error. */
const pageParts = () => ({
  about: h("p", { class: "muted about" }),
  paramBox: h("div"),
  projection: h("div", { class: "projection", "aria-live": "polite" }, "…"),
  projectionState: h("p", { class: "muted projection-state" }),
  slowWarnings: h("div", { class: "slow-warnings", "aria-live": "polite" }),
  partitionChart: h("div", { class: "chart small", id: "chart-partition-preview" }),
  switched: h("p", { class: "muted switched", role: "status" }),
  advanced: h("textarea", { name: "advanced", rows: 4, spellcheck: "false", class: "advanced" }),
  submitError: h("p", { class: "error-text submit-error", role: "alert" }),
});

/** The algorithm fieldset: its select, the line saying what a switch moved, its summary and its params. */
const algorithmFields = (algorithms, initial, { switched, about, paramBox }, switchAlgorithm) =>
  h("fieldset", {}, h("legend", {}, "Algorithm"),
    field("algorithm", "algorithm", h("select", { name: "algorithm", onchange: () => { switchAlgorithm(); } },
      algorithms.map((a) => h("option", { value: a.name, selected: a.name === initial.algorithm ? "" : null }, a.name)))),
    switched, about, paramBox);

/** The advanced fieldset: the box for the fields the form does not show. */
const advancedFields = (advanced) => h("fieldset", {}, h("legend", {}, "Advanced"),
  h("details", { class: "more-settings advanced-settings" }, h("summary", {}, "Fields the form does not show"),
    field("fields the form does not show, as a JSON object merged into the spec", "advanced", advanced,
      'e.g. {"dataset": {"options": {"num_samples": 2000}}}; a clone keeps its other fields here')));

/** The submit line: the start button and the link to the other mode (run or sweep). */
const submitLine = (sweepMode) => h("p", { class: "submit" }, h("button", { type: "submit", class: "primary" }, sweepMode ? "Start sweep" : "Start run"), " ",
  h("a", { href: sweepMode ? "#/new" : "#/new?mode=sweep" }, sweepMode ? "single run instead" : "sweep instead"));

/** The whole form: algorithm, data and advanced on the left; privacy, sweep, projection and submit on the right. */
function buildForm({ algorithms, datasets, catalogue, initial, sweep }, parts, on) {
  // a stored upload joins the dataset menu, chosen; with a user-id column its users are its natural ones
  const uploaded = (upload) => {
    const select = form.elements["dataset.name"];
    select.append(datasetOption(uploadChoice(upload), true));
    select.value = upload.name;
    if (upload.user_id && [...form.elements["dataset.users.kind"].options].some((o) => o.value === "natural")) form.elements["dataset.users.kind"].value = "natural";
    on.switchAlgorithm();
  };
  const form = h("form", { class: "spec", novalidate: true, onsubmit: (e) => { e.preventDefault(); on.submit(); }, oninput: (e) => { clearError(e.target); on.changed(); }, onchange: () => on.changed() },
    h("div", {}, algorithmFields(algorithms, initial, parts, on.switchAlgorithm), dataFields(initial, datasets, catalogue, uploaded), advancedFields(parts.advanced)),
    h("div", {}, privacyFields(initial.privacy, catalogue, () => on.changed()), sweep?.el ?? null,
      h("h2", {}, "Before it runs"), parts.projectionState, parts.projection, parts.slowWarnings, parts.partitionChart, submitLine(Boolean(sweep)), parts.submitError));
  return form;
}

/**
 * Returns a reader of the spec the form and the advanced box describe, or `null` with the errors
 * shown beside their fields; `more(spec)` adds the errors of fields beyond the spec (a sweep's lists).
 */
const specReader = (form, advanced, algorithms, more = () => ({})) => () => {
  const errors = formErrors(form);
  let fragment = {};
  try {
    fragment = parseFragment(advanced.value);
  } catch (err) {
    errors.advanced = err.message;
  }
  const spec = merge(readSpec(form, algorithms), fragment);
  Object.assign(errors, more(spec));
  if (Object.keys(errors).length) {
    showErrors(form, errors);
    return null;
  }
  return spec;
};

/** The projection as one line: σ and the projected ε (or "not private"), and the budget the run would use. */
function projectionText(p, datasetName) {
  const parts = p.notion === "none" ? ["not private: no ε is spent"]
    : [`σ = ${fmt(p.noise_multiplier?.length ? Math.max(...p.noise_multiplier) : p.noise_multiplier, 4)}`,
       `projected ε = ${fmt(p.epsilon, 4)} at δ = ${deltaText(p.delta)} (${p.accountant}, ${p.notion}-level)`];
  if (p.budget !== null && p.budget !== undefined) parts.push(`budget: this run needs ${fmt(p.epsilon)} of ${fmt(p.budget)} remaining on ${datasetName}`);
  return parts.join(" · ");
}

/** Returns what shows a run's projection: σ, the projected ε, the warnings and the partition's chart. */
const runProjection = ({ projection, slowWarnings, partitionChart }) => async (spec, current) => {
  const p = await api.project(spec);
  if (!current()) return;
  projection.textContent = projectionText(p, spec.dataset.name);
  replace(slowWarnings,
    ...(p.not_guaranteed ? [h("p", { class: "guarantee-warning error-text", role: "note" }, `Not guaranteed: ${p.not_guaranteed}; its ε would not bound what the run leaks.`)] : []),
    ...(p.implausible ?? []).map((w) => h("p", { class: "implausible-warning", role: "note" }, `Check: ${w}.`)),
    ...(p.warnings ?? []).map((w) => h("p", { class: "slow-warning", role: "note" }, `Slow: ${w}.`)));
  projection.dataset.noiseMultiplier = JSON.stringify(p.noise_multiplier);
  // a preview: no mode bar, whose ten buttons stood between the form and its Start button
  if (p.partition_figure) await draw(partitionChart, p.partition_figure, { displayModeBar: false });
};

/** Returns what shows a sweep's preview: its runs, worker tasks and estimated time. */
const sweepPreview = ({ projection }, request) => async (spec, current) => {
  const preview = await api.previewSweep(request(spec));
  if (current()) showPreview(projection, preview, spec.dataset.name);
};

/**
 * Returns `changed`: it shows the relevant fields, marks the shown projection stale and, 300 ms
 * after the last change, asks for a new one (`show(spec, current)`: a run's projection or a
 * sweep's preview); an answer to an older form is dropped. The form is counted when it changes,
 * not when it is sent: an answer that arrives while a newer form waits out its 300 ms is older too.
 */
function projectionUpdater(form, { projection, projectionState, slowWarnings }, relevant, specOrErrors, show) {
  let timer = null;
  let seq = 0;
  return () => {
    relevant();
    clearTimeout(timer);
    // the shown projection is for the form as it was: say so until the new one arrives
    projection.classList.add("stale");
    projection.setAttribute("aria-busy", "true");
    projectionState.textContent = "computing…";
    const mine = ++seq;
    timer = setTimeout(async () => {
      const spec = specOrErrors();
      if (!spec) {
        projectionState.textContent = "not computed: fix the fields marked in red";
        projection.removeAttribute("aria-busy");
        return;
      }
      try {
        await show(spec, () => mine === seq);
        if (mine !== seq) return;
        projection.classList.remove("stale");
        projectionState.textContent = "";
      } catch (err) {
        if (mine !== seq) return;
        replace(slowWarnings);
        projection.textContent = `Cannot project: ${err instanceof ApiError && err.status === 422 ? showErrors(form, formFieldNames(err.fields)) || "see the fields marked" : err.message}`;
        projection.classList.remove("stale");
        projectionState.textContent = "";
      }
      projection.removeAttribute("aria-busy");
    }, 300);
  };
}

/**
 * Returns the params renderer: the chosen algorithm's summary and inputs (a clone's values if it
 * is the clone's algorithm, or those set for it earlier in a sweep), then a new projection.
 */
const paramsRenderer = ({ about, paramBox }, base, paramsBy, chosen, changed) => () => {
  const algorithm = chosen();
  about.textContent = `${algorithm.summary} · privacy: ${algorithm.notion} · paper: ${algorithm.paper}`;
  const same = paramsBy[algorithm.name] ?? (base && base.algorithm === algorithm.name ? base.params : null);
  replace(paramBox, paramInputs(algorithm, same));
  changed();
};

/**
 * Returns the fields marked invalid in words, as their labels say, with the first one's message: on
 * a phone they are screens above the button, where the refusal is read.
 */
function invalidFields(form) {
  const invalid = [...form.querySelectorAll(".field.invalid")];
  if (!invalid.length) return "see the fields marked in red";
  const label = (el) => el.querySelector(":scope > span, :scope > legend")?.textContent.trim() || el.dataset.field;
  const first = `${label(invalid[0])}: ${invalid[0].querySelector(".error")?.textContent ?? ""}`;
  return invalid.length === 1 ? first : `${first} (and ${invalid.slice(1).map(label).join(", ")}, marked in red)`;
}

/** Shows `message` (default: the invalid fields) beside the submit button and moves focus to the first field marked invalid. */
function refuse(form, submitError, noun, message) {
  submitError.textContent = `Could not start ${noun}: ${message ?? invalidFields(form)}`;
  const invalid = form.querySelector(".field.invalid :is(input, select, textarea)");
  invalid?.focus({ preventScroll: true });
  invalid?.scrollIntoView({ block: "nearest" });
  // centred, not "nearest": aligned to the bottom edge it sat a subpixel past a phone's viewport
  submitError.scrollIntoView({ block: "center" });
}

/**
 * A 422's field names as the form's: a sweep's `base.` prefix dropped, `params_by_algorithm.X.`
 * read as `params.`, and an algorithm's own model shown beside the algorithms that chose it.
 */
const formFieldNames = (fields) => Object.fromEntries(Object.entries(fields).map(([k, m]) =>
  [k.replace(/^base\./, "").replace(/^params_by_algorithm\.[^.]+\./, "params.").replace(/^model_by_algorithm\..*/, "grid.algorithm"), m]));

/** A random idempotency key (crypto.randomUUID needs a secure context; a server on a LAN address is not one). */
const newKey = () => Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");

/** Returns the submit handler: it starts the run (or the sweep: `request(spec)`) and shows a refusal beside the fields and the button. */
function submitHandler(form, submitError, request, specOrErrors) {
  const sweepMode = Boolean(request);
  const refused = (message) => refuse(form, submitError, sweepMode ? "sweep" : "run", message);
  const button = form.querySelector('button[type="submit"]');
  let inFlight = false;
  return async () => {
    // Admission can take seconds (σ is calibrated): one POST at a time, and the run's key makes a
    // retried POST (a double click that got through, a resent request) find the same run.
    if (inFlight) return;
    submitError.textContent = "";
    // at submit every field is judged, those not yet typed in too (a sweep's axis added empty)
    for (const el of form.querySelectorAll("[data-untouched]")) delete el.dataset.untouched;
    const spec = specOrErrors();
    if (!spec) { refused(); return; }
    inFlight = true;
    button.disabled = true;
    try {
      if (!sweepMode) {
        const run = await api.createRun(spec, newKey());
        go(`runs/${run.id}`);
        return;
      }
      const sweep = await api.createSweep(request(spec));
      go("compare", { sweep: sweep.id });
    } catch (err) {
      if (err instanceof ApiError && err.status === 422) {
        const fields = formFieldNames(err.fields);
        // a field the form does not show was typed in the advanced box: its error goes there
        const rest = showErrors(form, fields);
        if (rest) showErrors(form, { ...fields, advanced: rest });
        refused(rest || undefined);
      } else {
        refused(err.message);
      }
    } finally {
      inFlight = false;
      button.disabled = false;
    }
  };
}

/** A clone keeps every field of its spec: those the form does not show go to the advanced box. */
function fillAdvanced(advanced, base, form, algorithms, catalogue) {
  const rest = unmodelled(base, readSpec(form, algorithms), kindDefaults(catalogue));
  advanced.value = Object.keys(rest).length ? JSON.stringify(rest, null, 1) : "";
  if (advanced.value) advanced.closest("details").open = true;  // a clone's own fields are seen
}

/**
 * A cloned sweep as the form shows it: a run spec of its first algorithm (with that algorithm's
 * params and the grid's first privacy value, so the privacy target is the sweep's), and every
 * algorithm's params, shared ones included.
 */
function sweepInitial(sweep) {
  const { params_by_algorithm: own = {}, model_by_algorithm: models = {}, ...base } = sweep.base;
  // shown first: an algorithm that runs with the base's model (the others keep their own)
  const algorithm = base.algorithm ?? sweep.grid.algorithm?.find((n) => !models[n]) ?? sweep.grid.algorithm?.[0] ?? DEFAULT_SPEC.algorithm;
  const names = sweep.grid.algorithm ?? [algorithm];
  const paramsBy = Object.fromEntries(names.map((n) => [n, { ...base.params, ...own[n] }]));
  const privacy = { ...(base.privacy ?? DEFAULT_SPEC.privacy) };
  for (const target of ["epsilon", "noise_multiplier", "mu"]) {
    if (sweep.grid[`privacy.${target}`]) {
      for (const other of ["epsilon", "noise_multiplier", "mu"]) delete privacy[other];
      privacy[target] = sweep.grid[`privacy.${target}`][0];
    }
  }
  const spec = { ...DEFAULT_SPEC, ...base, algorithm, params: paramsBy[algorithm], privacy, model: models[algorithm] ?? base.model ?? DEFAULT_SPEC.model };
  return { spec, paramsBy };
}

export async function render(root, { params }) {
  const [algorithms, datasets, catalogue] = await Promise.all([api.algorithms(), api.datasets(), api.options()]);
  const sweepMode = current().params.mode === "sweep";
  const base = params.from ? await api.spec(params.from) : null;
  const cloned = sweepMode && params.sweep ? await api.getSweep(params.sweep) : null;
  const fromSweep = cloned ? sweepInitial(cloned) : null;
  const initial = base ?? fromSweep?.spec ?? DEFAULT_SPEC;
  const paramsBy = { ...fromSweep?.paramsBy };  // a sweep's algorithms' params, set as each is chosen
  const parts = pageParts();
  const sweep = sweepMode ? sweepSection({ algorithms, catalogue, datasets: datasets.datasets, spec: initial, sweep: cloned }) : null;
  // the handlers need the form, so its listeners reach them through these arrows (called only after render has made them)
  const form = buildForm({ algorithms, datasets, catalogue, initial, sweep }, parts,
    { changed: () => changed(), switchAlgorithm: () => switchAlgorithm(), submit: () => submit() });
  const chosen = () => algorithms.find((a) => a.name === form.elements.algorithm.value);
  const request = sweep ? (spec) => sweep.request(form, spec, paramsBy) : null;
  const specOrErrors = specReader(form, parts.advanced, algorithms, sweep ? (spec) => sweep.errors(form, spec) : undefined);
  const relevant = () => { showRelevant(form, chosen(), catalogue); sweep?.relevant(form); };
  const changed = projectionUpdater(form, parts, relevant, specOrErrors, sweep ? sweepPreview(parts, request) : runProjection(parts));
  const renderParams = paramsRenderer(parts, base ?? fromSweep?.spec, paramsBy, chosen, changed);
  let shown = chosen().name;
  /** A new algorithm: the model, dataset and users it accepts, its params, and a line saying what moved; in a sweep, the params set for the one before are kept and the new one is ticked. */
  const switchAlgorithm = () => {
    if (sweep) {
      paramsBy[shown] = readParams(form, algorithms.find((a) => a.name === shown));
      form.querySelector(`input[name='sweep.algorithms'][value='${chosen().name}']`).checked = true;
    }
    shown = chosen().name;
    parts.switched.textContent = fitTo(form, chosen()).join("; ");
    renderParams();
  };
  const submit = submitHandler(form, parts.submitError, request, specOrErrors);

  const heading = sweepMode ? (cloned ? `New sweep (from ${cloned.name || cloned.id})` : "New sweep") : base ? `New run (from ${params.from})` : "New run";
  replace(root, h("h1", {}, heading), form);
  fitTo(form, chosen());  // disables what the algorithm does not accept (a clone's choices are accepted ones)
  renderParams();
  if (base ?? fromSweep) fillAdvanced(parts.advanced, base ?? fromSweep.spec, form, algorithms, catalogue);
  setTitle(sweepMode ? "New sweep" : "New run", root);
}
