// External runs (issue 45): runs executed elsewhere and logged through the ingestion API. Their ε
// is recomputed by the server from the ledger they reported; these helpers mark them and show the
// ε their own tool reported beside ours, flagged when it is smaller.
import { fmt, h } from "./dom.js";

/** @param {{source?: string}} run  @returns {boolean} whether the run was executed elsewhere */
export function isExternal(run) {
  return run?.source === "external";
}

/** Returns the "external" marker of a run executed elsewhere, or null for a run of ours. */
export function externalChip(run) {
  if (!isExternal(run)) return null;
  return h("span", { class: "chip external", title: "executed elsewhere and logged here; ledger as reported" }, "external");
}

/** Returns whether the ε the run's tool reported is smaller than ours (the server's accountant). */
export function reportedBelow(run) {
  return run.reported_epsilon != null && run.epsilon != null && run.reported_epsilon < run.epsilon * (1 - 1e-9);
}

/** Returns the line "ε reported by its tool: x · ours (rdp): y", flagged when the reported is smaller;
 * "" for a run that reported none. */
export function reportedText(run) {
  if (!isExternal(run) || run.reported_epsilon == null) return "";
  const ours = `ours (${run.accountant ?? "rdp"}, recomputed from its ledger): ${fmt(run.epsilon, 4)}`;
  const flag = reportedBelow(run) ? " — the reported ε is smaller than a sound accountant's" : "";
  return `ε reported by its tool: ${fmt(run.reported_epsilon, 4)} · ${ours}${flag}`;
}
