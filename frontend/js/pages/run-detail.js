// Run detail: status and live progress, learning curves, ε per party, partition, ledger
// (accountant switchable), the empirical audit of round 1, the spec as YAML, cancel and clone-and-edit,
// its name, tags and notes.
import { annotationEditor } from "../annotations.js";
import { api, subscribe } from "../api.js";
import { draw, preloadCharts } from "../charts.js";
import { banner, chip, deltaText, fmt, h, replace, setTitle } from "../dom.js";
import { isExternal } from "../external.js";
import { setParams } from "../state.js";
import { runHeader } from "./run-header.js";

/** Returns a ledger event in words (its JSON is the cell's tooltip); an unknown kind as JSON. */
export function describeEvent(ev) {
  switch (ev.kind) {
    case "gaussian": return `Gaussian σ = ${fmt(ev.noise_multiplier, 4)}`;
    case "laplace": return `Laplace, noise multiplier ${fmt(ev.noise_multiplier, 4)}`;
    case "gdp": return `${fmt(ev.mu, 4)}-GDP${ev.neighbouring === "replace_one" ? " (replace-one record)" : ""}`;
    case "poisson_sampled": return `Poisson-sampled (q = ${fmt(ev.sampling_rate, 4)}) ${describeEvent(ev.event)}`;
    case "sampled_without_replacement": return `sampled ${ev.sample_size} of ${ev.population_size} without replacement (replace-one) ${describeEvent(ev.event)}`;
    case "self_composed": return `${ev.count} × ${describeEvent(ev.event)}`;
    case "composed": return ev.events.map(describeEvent).join(" + ");
    case "parallel": return `parallel over ${ev.events.length} disjoint parts: ${[...new Set(ev.events.map(describeEvent))].join(" | ")}`;
    case "vote": return `noisy-argmax vote σ = ${fmt(ev.noise_std, 4)}, sensitivity ${fmt(ev.sensitivity, 4)}`;
    case "shuffle": return `shuffle of ${ev.num_users} reports, each ε₀ = ${fmt(ev.local_epsilon, 4)}`;
    case "approx_dp": return `(${fmt(ev.epsilon, 4)}, ${deltaText(ev.delta)})-DP release`;
    case "group": return `group of ${ev.group_size}: ${describeEvent(ev.event)}`;
    default: return JSON.stringify(ev);
  }
}

/** Returns a ledger cell's events in words, identical ones counted once ("20 × noisy-argmax vote …"). */
export function describeEvents(events) {
  const counts = new Map();
  for (const text of events.map(describeEvent)) counts.set(text, (counts.get(text) ?? 0) + 1);
  return [...counts].map(([text, n]) => (n > 1 ? `${n} × ${text}` : text)).join("; ");
}

/** Returns the last evaluated round's diagnostics, labelled not private, or why there are none. */
export function diagnosticsBox(run, rounds) {
  if (run.protected) return h("p", { class: "muted" }, "Withheld: this dataset has a privacy budget, so outputs computed on its records without noise are not shown.");
  const last = rounds.length ? rounds[rounds.length - 1].diagnostics : null;
  if (!last || !Object.keys(last).length) return h("p", { class: "muted" }, "none yet");
  return h("dl", { class: "kv diagnostics" }, Object.entries(last).flatMap(([k, v]) => [h("dt", {}, k.replaceAll("_", " ")), h("dd", {}, fmt(v, 4))]));
}

/**
 * Returns the ledger's accountant choices from GET /api/options: the run's own first, then every
 * accountant; one that cannot give a run's headline ε is still offered for recomputing, labelled.
 */
export function accountantChoices(options) {
  return [["", "the run's own", null], ...options.accountants.map((a) => [a.name,
    a.headline_always ? a.name : `${a.name} (recompute only: ${a.data_dependent ? "data-dependent, never a headline" : "not every run's headline"})`,
    a.headline])];
}

const AUDIT_POLL_MS = 2000;
const AUDIT_LIVE = ["queued", "running"];

/**
 * Returns one release's audit in words, after the server's verdict: "audited: ε ≥ 0.9 (95 %) —
 * ledger ε 2.0 ✓" (no violation found), "?" and why (inconclusive: only a single test's bound is
 * above ε), or ✗ and why (a violation proven: a sensitivity above the claimed one, or the
 * family-wise lower bound above ε). An audit stored before verdicts has only `sound`.
 * @param {import("../api.js").ReleaseAudit} r
 */
export function auditVerdict(r) {
  const line = `audited: ε ≥ ${fmt(r.epsilon_lower, 3)} (${Math.round((r.confidence ?? 0.95) * 100)} %) — ledger ε ${fmt(r.epsilon_ledger, 3)}`;
  const verdict = r.verdict ?? (r.sound ? "no violation found" : "violation");
  if (verdict === "no violation found") return `${line} ✓`;
  if (verdict === "inconclusive") return `${line} ? (inconclusive: one test's bound ${fmt(r.epsilon_lower_each, 3)} is above the ledger's ε; audit with more seeds)`;
  const why = [];
  if (r.max_sensitivity_ratio > 1) why.push(`a neighbour moves it ${fmt(r.max_sensitivity_ratio, 4)} × the claimed sensitivity`);
  if (r.epsilon_lower > r.epsilon_ledger) why.push("the lower bound exceeds the ledger's ε");
  return `${line} ✗ (${why.join("; ") || "not sound"})`;
}

/**
 * Returns the black-box trials in words: "black box, 2 rounds, 1,000 runs per side: TPR ≥ 0.92 at
 * FPR ≤ 0.11 — within the ledger's profile ✓", or "— beats the ledger's profile ✗ (violation)".
 * @param {import("../api.js").BlackBoxAudit} b
 */
export function blackBoxVerdict(b) {
  const line = `black box, ${b.rounds} round${b.rounds === 1 ? "" : "s"}, ${b.trials.toLocaleString("en")} runs per side: `
    + `TPR ≥ ${fmt(b.tpr_low, 3)} at FPR ≤ ${fmt(b.fpr_high, 3)} (${Math.round(b.confidence * 100)} %)`;
  return b.verdict === "violation"
    ? `${line} — beats the ledger's profile ✗ (violation: the code releases more than its ledger accounts)`
    : `${line} — within the ledger's profile ✓`;
}

/** Returns an audit as nodes: its status while queued or running, its error, or a line per release
 * and one for the black-box trials. */
export function auditBox(audit) {
  if (!audit) return h("p", { class: "muted audit-status" }, "not audited");
  if (AUDIT_LIVE.includes(audit.status)) {
    const black = audit.black_box_trials ? ` and ${audit.black_box_trials.toLocaleString("en")} black-box runs per side` : "";
    return h("p", { class: "muted audit-status" }, chip(audit.status), ` auditing round 1 with ${audit.trials.toLocaleString("en")} trials per side${black}…`);
  }
  if (audit.status === "failed") return h("p", { class: "error-text audit-error" }, `Audit failed: ${audit.error ?? "unknown error"}`);
  const b = audit.result?.black_box;
  return h("ul", { class: "audit" }, (audit.result?.releases ?? []).map((r) => h("li", {
    class: r.sound ? (r.verdict === "inconclusive" ? "audit-inconclusive" : "audit-sound") : "audit-violation error-text", title: `worst neighbours: ${r.neighbours}`,
    dataset: { release: r.release },
  }, h("strong", {}, `${r.release}: `), auditVerdict(r))), b ? h("li", {
    class: b.verdict === "violation" ? "audit-violation error-text audit-black-box" : "audit-sound audit-black-box", title: `canary: ${b.neighbours}`,
    dataset: { release: b.release },
  }, h("strong", {}, `${b.release}: `), blackBoxVerdict(b)) : null);
}

/** Returns `value` as YAML (the subset specs use: maps, lists, scalars). */
export function toYaml(value, indent = "") {
  if (Array.isArray(value)) {
    if (value.every((v) => typeof v !== "object" || v === null)) return `[${value.map((v) => JSON.stringify(v)).join(", ")}]`;
    return value.map((v) => `\n${indent}- ${toYaml(v, `${indent}  `).trimStart()}`).join("");
  }
  if (value && typeof value === "object") {
    return Object.entries(value).map(([k, v]) => {
      const inner = toYaml(v, `${indent}  `);
      return `\n${indent}${k}:${v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length ? inner : ` ${inner.trimStart()}`}`;
    }).join("");
  }
  return value === null ? "null" : typeof value === "string" ? value : String(value);
}

export async function render(root, { id, params }) {
  setTitle(`Run ${id}`, root);
  preloadCharts();
  // an unknown id is said at once, without the page of a run (and its Cancel and Delete) around it
  let first;
  try {
    first = await api.getRun(id);
  } catch (err) {
    if (err.status !== 404) throw err;
    replace(root, h("h1", {}, "Run not found"),
      h("p", { class: "not-found" }, `No run has the id ${id}: it was deleted, or the link is mistyped. `, h("a", { href: "#/runs" }, "All runs")));
    return;
  }
  const accountant = params.accountant ?? "";
  const header = runHeader(id, () => loadHeader());
  const charts = { learning: h("div", { class: "chart", id: "chart-learning" }), epsilon: h("div", { class: "chart", id: "chart-epsilon" }),
    partition: h("div", { class: "chart", id: "chart-partition" }), users: h("div", { class: "chart", id: "chart-users" }) };
  const usersCard = h("div", { class: "card", hidden: "" }, h("h2", {}, "Users across silos (not private)"), charts.users);
  const diagnosticsCard = h("div", { class: "card" });
  const ledgerBox = h("div");
  const auditCard = h("div", { class: "audit-card" });
  let auditTimer = null;
  let currentRun = first;
  const options = api.options();  // once per page: the ledger reloads on every round of a live run
  const specBox = h("pre", { class: "spec", tabindex: 0, "aria-label": "the run's spec as YAML" });  // it scrolls: reachable by keyboard

  async function loadHeader() {
    const run = await api.getRun(id);
    currentRun = run;
    header.update(run);
    return run;
  }

  async function loadDiagnostics(run) {
    const rounds = run.protected ? [] : await api.metrics(id);
    replace(diagnosticsCard, h("h2", {}, "Diagnostics: not private"),
      h("p", { class: "muted" }, "Computed from the private records without noise, so not covered by the ledger's ε."),
      diagnosticsBox(run, rounds));
  }

  async function loadCharts() {
    // an accountant that cannot account this run is said beside the ledger; the charts keep the run's own
    const figures = await api.runFigures(id, accountant || undefined).catch(() => api.runFigures(id));
    // one chart a task: the ledger's and the diagnostics' answers, in by now, fill their tables
    // between the draws instead of after all of them
    for (const [key, el] of Object.entries(charts)) {
      if (!figures[key]) continue;
      await new Promise((resolve) => setTimeout(resolve));
      await draw(el, figures[key]);
    }
    usersCard.hidden = !figures.users;
  }

  async function loadLedger() {
    const choices = accountantChoices(await options);
    const select = h("select", { name: "accountant", onchange: (e) => { setParams({ accountant: e.target.value }, root); render(root, { id, params: { accountant: e.target.value } }); } },
      choices.map(([value, label, title]) => h("option", { value, title, selected: value === accountant ? "" : null }, label)));
    try {
      const ledger = await api.ledger(id, accountant || undefined);
      const rows = ledger.events.slice(0, 500).map((e) => h("tr", {}, h("td", { class: "num" }, e.round), h("td", {}, e.party),
        h("td", { class: "releases", title: e.events.map((ev) => JSON.stringify(ev)).join("\n") }, describeEvents(e.events)),
        h("td", { class: "num" }, fmt(ledger.parties[e.party]?.[ledger.rounds.indexOf(e.round)], 4))));
      // gdp's CLT or pate's data-dependent bound is not a guarantee: label it, never a plain ε
      const caveats = [ledger.approximate && "approximate", ledger.data_dependent && "data-dependent"].filter(Boolean);
      replace(ledgerBox, h("div", { class: "toolbar" }, h("label", {}, "accountant", select),
        h("span", { class: "ledger-eps" }, `ε = ${fmt(ledger.epsilon, 5)} at δ = ${deltaText(ledger.delta)} (${ledger.accountant})`
          + (caveats.length ? ` — ${caveats.join(", ")}, not the run's guarantee` : ""))),
        caveats.length ? h("p", { class: "muted ledger-notes" }, ledger.notes.join("; ")) : null,
        h("div", { class: "table-scroll" }, h("table", { class: "grid ledger" }, h("thead", {}, h("tr", {}, ["round", "party", "releases", "ε after"].map((c) => h("th", { scope: "col" }, c)))), h("tbody", {}, rows))),
        ledger.events.length > 500 ? h("p", { class: "muted" }, `first 500 of ${ledger.events.length} rows`) : null);
    } catch (err) {
      replace(ledgerBox, h("div", { class: "toolbar" }, h("label", {}, "accountant", select)), h("p", { class: "error-text" }, `Could not account this ledger: ${err.message}`));
    }
  }

  /** Shows the latest audit (polling while it is queued or running) and, for a private run, the button. */
  async function loadAudit(run) {
    clearTimeout(auditTimer);
    if (run.notion === "none" || isExternal(run)) { replace(auditCard); return; } // external: no code to audit
    if (run.protected) {
      replace(auditCard, h("h2", {}, "Audit"), h("p", { class: "muted audit-status" }, "Not audited: an audit releases round 1 many times without accounting, so runs on a dataset with a privacy budget are not audited."));
      return;
    }
    let audit = null;  // null: not audited
    try {
      audit = await api.getAudit(id);
    } catch (err) {
      replace(auditCard, h("p", { class: "error-text" }, `Could not load the audit: ${err.message}`));
      return;
    }
    const live = audit && AUDIT_LIVE.includes(audit.status);
    const button = h("button", { class: "audit-button", disabled: live, title: "Fuzz round 1's sensitivity and bound ε from below with many trials", onclick: async () => {
      try { await api.auditRun(id); await loadAudit(run); } catch (err) { banner(`Could not start the audit: ${err.message}`); }
    } }, live ? "Auditing…" : "Audit");
    // the audit fixes each release's sample, so its ledger ε is one round-1 release without the
    // sub-sampling amplification the ledger table above includes (dpfl/audit/rounds.py)
    const note = audit?.status === "succeeded" ? h("p", { class: "muted audit-note" },
      `Each round-1 release with its sample fixed (no sub-sampling amplification), ${audit.trials.toLocaleString("en")} trials per side; `
      + "ledger ε is that one release's ε at the run's δ."
      + (audit.result?.black_box ? " The black box: whole runs of the first rounds, their own sampling and noise, against the ledger's privacy profile." : "")
      + " ✗ means the audit contradicts the ledger.") : null;
    replace(auditCard, h("h2", {}, "Audit (not private) ", button), note, auditBox(audit));
    if (live) auditTimer = setTimeout(() => loadAudit(run).catch(() => {}), AUDIT_POLL_MS);
  }

  const about = h("div", { class: "card about" }, h("h2", {}, "Name, tags and notes"));
  replace(root, header.el, about,
    h("div", { class: "cards" }, h("div", { class: "card" }, h("h2", {}, "Accuracy and loss per round"), charts.learning),
      h("div", { class: "card" }, h("h2", {}, "ε spent per round, per party"), charts.epsilon),
      h("div", { class: "card" }, h("h2", {}, "Partition: labels per silo (not private)"), charts.partition),
      usersCard, diagnosticsCard),
    h("h2", {}, "Ledger"), ledgerBox, auditCard,
    h("h2", {}, "Spec ", h("button", { onclick: () => navigator.clipboard?.writeText(specBox.textContent) }, "Copy YAML")), specBox);

  const run = first;
  header.update(run);
  // filled once: live updates of the header must not overwrite what is being typed
  about.append(annotationEditor(run, async (changes) => {
    currentRun = await api.patchRun(id, changes);
    header.update(currentRun);
    return currentRun;
  }).el);
  const loadSpec = async () => { specBox.textContent = toYaml(await api.spec(id)).trimStart(); };
  await Promise.all([loadSpec(), loadCharts(), loadLedger(), loadDiagnostics(run), loadAudit(run)]);
  const stopAudit = () => clearTimeout(auditTimer);
  if (["succeeded", "failed", "cancelled"].includes(run.status)) return stopAudit;
  let lastRound = run.current_round;
  const refresh = async (ev) => {
    await loadHeader();
    if (ev && ev.current_round === lastRound && !["succeeded", "failed", "cancelled"].includes(ev.status)) return;
    lastRound = ev?.current_round ?? lastRound;
    await Promise.all([loadCharts(), loadLedger(), loadDiagnostics(currentRun)]);
  };
  const unsubscribe = subscribe({ run: id }, (ev) => refresh(ev).catch(() => {}), () => refresh(null));
  return () => { unsubscribe(); stopAudit(); };
}
