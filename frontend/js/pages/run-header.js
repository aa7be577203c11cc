// The run page's header: title, status, progress, Cancel, Clone, Archive and Delete, its sweep,
// the "no better than guessing" flag, what the ε rests on. Built
// once and updated in place on every event (several a second while a run is live), so the
// buttons keep keyboard focus.
import { api } from "../api.js";
import { banner, chip, deltaText, fmt, h, progressBar, replace, setChip, setProgress, setTitle } from "../dom.js";
import { externalChip, isExternal, reportedBelow, reportedText } from "../external.js";
import { go } from "../state.js";

const FINISHED = ["succeeded", "failed", "cancelled"];

/** Returns a run's wall time, and once it has ended where that time went and on how many threads. */
export function duration(run) {
  if (run.duration_s == null) return "–";
  const t = run.timings;
  if (!t) return `${fmt(run.duration_s, 3)} s`;
  // runs recorded before the threads were kept have only the times
  const threads = t.threads == null ? "" : `; ${t.threads} torch thread${t.threads === 1 ? "" : "s"}`;
  // a batched run's training time is its share of its batch's rounds
  const batch = t.batch_runs > 1 ? `; trained in a batch of ${t.batch_runs}, training is its share` : "";
  return `${fmt(run.duration_s, 3)} s (setup ${fmt(t.setup_s, 2)} s, training ${fmt(t.train_s, 2)} s, `
    + `evaluation ${fmt(t.eval_s, 2)} s${threads}${batch})`;
}

/** Returns a run's σ: one value, or the range of its silos' values in enough digits to tell them apart. */
export function noiseMultiplier(sigma) {
  if (!Array.isArray(sigma)) return fmt(sigma, 4);
  const [low, high] = [Math.min(...sigma), Math.max(...sigma)];
  let digits = 3;
  while (digits < 8 && low !== high && fmt(low, digits) === fmt(high, digits)) digits += 1;
  return low === high ? `${fmt(low, 4)} (every silo)` : `${fmt(low, digits)}–${fmt(high, digits)} (per silo)`;
}

/** Returns the run's caveats as a list: what its ε rests on or does not cover (breaking ones marked). */
export function caveatList(caveats) {
  if (!caveats?.length) return null;
  return h("ul", { class: "caveats" }, caveats.map((c) => h("li", { class: c.breaks_guarantee ? "error-text" : "" },
    h("strong", {}, `${c.kind.replace("_", "-")}${c.breaks_guarantee ? " (not covered by ε)" : ""}: `), c.text)));
}

/** Returns the flag of a private run no better than guessing the majority class, or "": judged by
 * the server in its dataset's headline metric (`headline_metric`: accuracy, or balanced accuracy,
 * where the majority class scores 1/|K|), which the flag names. */
export function guessingText(run) {
  if (run.no_better_than_guessing !== true) return "";
  const metric = run.headline_metric ?? "accuracy";
  return `${metric.replaceAll("_", " ")} ${fmt(run[`final_${metric}`])} is no better than guessing the majority class (${fmt(run.chance_baseline)}; ${run.baseline_label})`;
}

/** Returns [label, values] of a run's final results: its dataset's headline metric first where that
 * is not accuracy (Creditcard's balanced accuracy, beside an accuracy of 0.998 for any guesser). */
export function outcomeText(run) {
  if (run.headline_metric === "balanced_accuracy") {
    return ["balanced accuracy / accuracy / loss", `${fmt(run.final_balanced_accuracy)} / ${fmt(run.final_accuracy)} / ${fmt(run.final_loss)}`];
  }
  return ["accuracy / loss", `${fmt(run.final_accuracy)} / ${fmt(run.final_loss)}`];
}

/** Returns {el, update(run)}: the header of run `id`; `onChanged` is called after a cancel or an
 * archive is accepted. */
export function runHeader(id, onChanged) {
  const title = document.createTextNode("");
  const status = chip("queued");
  const bar = progressBar(0, "progress of the run");
  const round = h("span", { class: "muted round" });
  const cancel = h("button", { class: "danger", onclick: async () => {
    try { await api.cancelRun(id); await onChanged(); } catch (err) { banner(`Could not cancel: ${err.message}`); }
  } }, "Cancel");
  // refusals (409: live, or spent budget) are shown beside the buttons, not in the page banner
  const actionError = h("p", { class: "error-text run-actions-error", role: "alert" });
  let archived = false;
  const archive = h("button", { class: "archive", onclick: async () => {
    actionError.textContent = "";
    try { await api.patchRun(id, { archived: !archived }); await onChanged(); } catch (err) { actionError.textContent = `Could not archive: ${err.message}`; }
  } }, "Archive");
  const remove = h("button", { class: "danger delete", onclick: async () => {
    actionError.textContent = "";
    if (!window.confirm("Delete this run with its metrics and ledger?")) return;
    try { await api.deleteRun(id); go("runs"); } catch (err) { actionError.textContent = `Not deleted: ${err.message}`; }
  } }, "Delete");
  const guessing = h("p", { class: "guessing-flag", role: "note", hidden: true });
  const sweepLink = h("p", { class: "sweep-link" });
  let sweepShown = null;
  const error = h("p", { class: "error-text run-error", hidden: true });
  const warning = h("p", { class: "error-text privacy-warning", hidden: true });
  const caveats = h("div");
  const reported = h("p", { class: "reported-epsilon", hidden: true });
  const marker = h("span");
  const clone = h("button", { onclick: () => go("new", { from: id }) }, "Clone and edit");
  const dd = Object.fromEntries(["privacy", "eps", "sigma", "noise-source", "acc", "worker", "duration"].map((k) => [k, h("dd", { class: k })]));
  const accLabel = h("dt", {}, "accuracy / loss");
  const el = h("div", { class: "run-header" },
    h("h1", {}, title, " ", status, marker),
    h("div", { class: "toolbar" }, bar, round, cancel, clone, archive, remove),
    actionError, sweepLink, guessing, error, warning, reported, caveats,
    h("dl", { class: "kv" },
      h("dt", {}, "privacy"), dd.privacy, h("dt", {}, "ε target / spent"), dd.eps, h("dt", {}, "noise multiplier"), dd.sigma,
      h("dt", {}, "noise"), dd["noise-source"], accLabel, dd.acc, h("dt", {}, "worker"), dd.worker,
      h("dt", {}, "duration"), dd.duration));
  let shownCaveats = null;

  function update(run) {
    const finished = FINISHED.includes(run.status);
    const what = `${run.name ? `${run.name} · ` : ""}${run.algorithm} on ${run.dataset}`;
    title.data = what;
    setTitle(`${what} · ${run.status}`, el);
    archived = run.archived;
    archive.textContent = run.archived ? "Unarchive" : "Archive";
    remove.disabled = !finished;
    guessing.textContent = guessingText(run);
    guessing.hidden = !guessing.textContent;
    if (run.sweep_id !== sweepShown) { sweepShown = run.sweep_id; showSweep(run.sweep_id); }
    setChip(status, run.status);
    setProgress(bar, run.progress);
    // a start can take minutes (loading data, calibrating σ, a key set-up): say which part it is in
    round.textContent = run.status === "preparing" ? `preparing: ${run.phase ?? "starting"}…` : `round ${run.current_round} of ${run.rounds}`;
    cancel.disabled = finished || run.cancel_requested;
    cancel.textContent = run.cancel_requested && !finished ? "cancelling…" : "Cancel";
    error.textContent = run.error ?? "";
    error.hidden = !run.error;
    warning.textContent = run.warning ? `Privacy: ${run.warning}.` : "";
    warning.hidden = !run.warning;
    // an external run: marked, never cloned (no spec of ours), its tool's ε beside ours
    replace(marker, externalChip(run) ? [" ", externalChip(run)] : []);
    clone.hidden = isExternal(run);
    reported.textContent = reportedText(run);
    reported.hidden = !reported.textContent;
    reported.classList.toggle("error-text", reportedBelow(run));
    const caveatKey = JSON.stringify(run.caveats ?? null);
    if (caveatKey !== shownCaveats) { replace(caveats, caveatList(run.caveats)); shownCaveats = caveatKey; }
    dd.privacy.textContent = run.notion === "none" ? "not private" : `${run.notion}-level, δ = ${deltaText(run.delta)}, ${run.accountant}`;
    dd.eps.textContent = `${fmt(run.target_epsilon)} / ${fmt(run.epsilon, 4)}`;
    dd.sigma.textContent = noiseMultiplier(run.noise_multiplier);
    dd["noise-source"].textContent = isExternal(run) ? "executed elsewhere: as its code reported"
      : run.protected ? "protected: OS entropy, never stored" : "simulation: seeded from the spec";
    [accLabel.textContent, dd.acc.textContent] = outcomeText(run);
    dd.worker.textContent = run.worker ?? "–";
    dd.duration.textContent = duration(run);
  }
  /** "part of sweep <name>", linking to the sweep on Compare and to the Runs list filtered by it. */
  async function showSweep(sweepId) {
    if (!sweepId) { replace(sweepLink); return; }
    const q = encodeURIComponent(sweepId);
    const name = await api.getSweep(sweepId).then((s) => s.name || sweepId.slice(0, 8), () => sweepId.slice(0, 8));
    replace(sweepLink, "part of sweep ", h("a", { class: "sweep-compare", href: `#/compare?sweep=${q}` }, name),
      " (", h("a", { class: "sweep-runs", href: `#/runs?sweep=${q}` }, "its runs"), ")");
  }
  return { el, update };
}
