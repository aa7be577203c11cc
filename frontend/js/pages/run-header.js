// The run page's header: title, status, progress, Cancel and Clone, what the ε rests on. Built
// once and updated in place on every event (several a second while a run is live), so the
// buttons keep keyboard focus.
import { api } from "../api.js";
import { banner, chip, fmt, h, progressBar, replace, setChip, setProgress, setTitle } from "../dom.js";
import { go } from "../state.js";
import { caveatList, duration, noiseMultiplier } from "./run-detail.js";

const FINISHED = ["succeeded", "failed", "cancelled"];

/** Returns {el, update(run)}: the header of run `id`; `onCancelled` is called after a cancel is accepted. */
export function runHeader(id, onCancelled) {
  const title = document.createTextNode("");
  const status = chip("queued");
  const bar = progressBar(0, "progress of the run");
  const round = h("span", { class: "muted round" });
  const cancel = h("button", { class: "danger", onclick: async () => {
    try { await api.cancelRun(id); await onCancelled(); } catch (err) { banner(`Could not cancel: ${err.message}`); }
  } }, "Cancel");
  const error = h("p", { class: "error-text run-error", hidden: true });
  const warning = h("p", { class: "error-text privacy-warning", hidden: true });
  const caveats = h("div");
  const dd = Object.fromEntries(["privacy", "eps", "sigma", "noise-source", "acc", "worker", "duration"].map((k) => [k, h("dd", { class: k })]));
  const el = h("div", { class: "run-header" },
    h("h1", {}, title, " ", status),
    h("div", { class: "toolbar" }, bar, round, cancel, h("button", { onclick: () => go("new", { from: id }) }, "Clone and edit")),
    error, warning, caveats,
    h("dl", { class: "kv" },
      h("dt", {}, "privacy"), dd.privacy, h("dt", {}, "ε target / spent"), dd.eps, h("dt", {}, "noise multiplier"), dd.sigma,
      h("dt", {}, "noise"), dd["noise-source"], h("dt", {}, "accuracy / loss"), dd.acc, h("dt", {}, "worker"), dd.worker,
      h("dt", {}, "duration"), dd.duration));
  let shownCaveats = null;

  function update(run) {
    const finished = FINISHED.includes(run.status);
    title.data = `${run.algorithm} on ${run.dataset}`;
    setTitle(`${run.algorithm} on ${run.dataset} · ${run.status}`);
    setChip(status, run.status);
    setProgress(bar, run.progress);
    round.textContent = `round ${run.current_round} of ${run.rounds}`;
    cancel.disabled = finished || run.cancel_requested;
    cancel.textContent = run.cancel_requested && !finished ? "cancelling…" : "Cancel";
    error.textContent = run.error ?? "";
    error.hidden = !run.error;
    warning.textContent = run.warning ? `Privacy: ${run.warning}.` : "";
    warning.hidden = !run.warning;
    const caveatKey = JSON.stringify(run.caveats ?? null);
    if (caveatKey !== shownCaveats) { replace(caveats, caveatList(run.caveats)); shownCaveats = caveatKey; }
    dd.privacy.textContent = run.notion === "none" ? "not private" : `${run.notion}-level, δ = ${run.delta}, ${run.accountant}`;
    dd.eps.textContent = `${fmt(run.target_epsilon)} / ${fmt(run.epsilon, 4)}`;
    dd.sigma.textContent = noiseMultiplier(run.noise_multiplier);
    dd["noise-source"].textContent = run.protected ? "protected: OS entropy, never stored" : "simulation: seeded from the spec";
    dd.acc.textContent = `${fmt(run.final_accuracy)} / ${fmt(run.final_loss)}`;
    dd.worker.textContent = run.worker ?? "–";
    dd.duration.textContent = duration(run);
  }
  return { el, update };
}
