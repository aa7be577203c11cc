// The only caller of fetch: every API path is defined here once.

/** @typedef {{id: string, status: string, algorithm: string, dataset: string, sweep_id: ?string,
 *   progress: number, current_round: number, rounds: number, target_epsilon: ?number,
 *   epsilon: ?number, delta: ?number, noise_multiplier: any, final_accuracy: ?number,
 *   final_balanced_accuracy: ?number, duration_s: ?number, error: ?string, notion: string, cancel_requested: boolean}} Run */

/** @typedef {{release: string, neighbours: string, epsilon_lower: number, epsilon_ledger: number,
 *   max_sensitivity_ratio: number, claimed_sensitivity: number, noise_std: number,
 *   noise_multiplier: number, trials: number, seeds: number, epsilon_lower_each: number,
 *   verdict: "violation" | "inconclusive" | "no violation found", sound: boolean}} ReleaseAudit */
/** @typedef {{release: string, neighbours: string, rounds: number, trials: number, seeds: number,
 *   statistic: string, tpr_low: number, fpr_high: number, excess: ?number, epsilon_lower: number,
 *   epsilon_ledger: number, confidence: number, verdict: string}} BlackBoxAudit */
/** @typedef {{id: string, run_id: string, status: string, trials: number, seeds: number,
 *   black_box_trials: number, result: ?{releases: ReleaseAudit[], black_box?: BlackBoxAudit},
 *   error: ?string, created_at: string,
 *   started_at: ?string, finished_at: ?string}} Audit */

export class ApiError extends Error {
  /** @param {number} status @param {any} detail */
  constructor(status, detail) {
    super(typeof detail === "string" ? detail : Array.isArray(detail) ? detail.map((d) => d.msg).join("; ") : `HTTP ${status}`);
    this.status = status;
    this.detail = detail;
  }

  /** Field errors as {"privacy.epsilon": "message"} from a 422 body's loc paths. */
  get fields() {
    if (!Array.isArray(this.detail)) return {};
    return Object.fromEntries(this.detail.map((d) => [d.loc.filter((p) => p !== "body").join("."), d.msg]));
  }
}

export async function request(path, init = {}) {
  const headers = { ...(init.body && !(init.body instanceof FormData) ? { "content-type": "application/json" } : {}), ...init.headers };
  const token = localStorage.getItem("dpfl.token");
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await fetch(`/api${path}`, { ...init, headers });
  if (res.status === 204) return null;
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new ApiError(res.status, body.detail ?? res.statusText);
  return body;
}

const post = (path, body) => request(path, { method: "POST", body: JSON.stringify(body ?? {}) });
const query = (params) => {
  const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== ""));
  return q.toString() ? `?${q}` : "";
};
// runs table and run page: the runs list's `tag` is repeated (tag=a&tag=b: runs with all of them)
const runQuery = ({ tag = [], ...params }) => {
  const tags = new URLSearchParams(tag.map((t) => ["tag", t])).toString();
  const q = query(params);
  if (!tags) return q;
  return q ? `${q}&${tags}` : `?${tags}`;
};
const send = (method, path, body) => request(path, { method, body: body === undefined ? undefined : JSON.stringify(body) });

export const api = {
  algorithms: () => request("/algorithms"),
  datasets: () => request("/datasets"),
  uploadDataset: (form) => request("/datasets", { method: "POST", body: form }),
  listRuns: (params = {}) => request(`/runs${runQuery(params)}`),
  runsCsvUrl: (params = {}) => `/api/runs.csv${runQuery(params)}`,
  getRun: (id) => request(`/runs/${encodeURIComponent(id)}`),
  createRun: (spec, idempotencyKey) => request("/runs", { method: "POST", body: JSON.stringify(spec), headers: idempotencyKey ? { "idempotency-key": idempotencyKey } : {} }),
  cancelRun: (id) => post(`/runs/${encodeURIComponent(id)}/cancel`),
  metrics: (id) => request(`/runs/${encodeURIComponent(id)}/metrics`),
  ledger: (id, accountant) => request(`/runs/${encodeURIComponent(id)}/ledger${query({ accountant })}`),
  auditRun: (id, trials) => post(`/runs/${encodeURIComponent(id)}/audit`, trials ? { trials } : {}),
  getAudit: (id) => request(`/runs/${encodeURIComponent(id)}/audit`),
  spec: (id) => request(`/runs/${encodeURIComponent(id)}/spec`),
  runFigures: (id, accountant) => request(`/runs/${encodeURIComponent(id)}/figures${query({ accountant })}`),
  project: (spec) => post("/privacy/project", spec),
  listSweeps: () => request("/sweeps"),
  getSweep: (id) => request(`/sweeps/${encodeURIComponent(id)}`),
  createSweep: (body) => post("/sweeps", body),
  previewSweep: (body) => post("/sweeps/preview", body),
  summary: (id) => request(`/sweeps/${encodeURIComponent(id)}/summary`),
  tradeoffFigure: (params) => request(`/figures/tradeoff${query(params)}`),
  tradeoffPoints: (params) => request(`/figures/tradeoff/points${query(params)}`),
  tradeoffPointsCsvUrl: (params) => `/api/figures/tradeoff/points.csv${query(params)}`,
  spentFigure: (runs) => request(`/figures/spent${query({ runs: runs.join(",") })}`),
  listBudgets: () => request("/budgets"),
  getBudget: (dataset) => request(`/budgets/${encodeURIComponent(dataset)}`),
  deleteBudget: (dataset) => request(`/budgets/${encodeURIComponent(dataset)}`, { method: "DELETE" }),
  // body: {total_epsilon, and optionally delta, notion, neighbouring}
  putBudget: (dataset, body) => request(`/budgets/${encodeURIComponent(dataset)}`, { method: "PUT", body: JSON.stringify(body) }),
  // registries: models, partition and user kinds, accountants, notions
  options: () => request("/options"),
  // runs table and run page
  patchRun: (id, changes) => send("PATCH", `/runs/${encodeURIComponent(id)}`, changes),
  deleteRun: (id) => send("DELETE", `/runs/${encodeURIComponent(id)}`),
  // compare
  searchSweeps: (params = {}) => request(`/sweeps${query(params)}`),
  patchSweep: (id, changes) => send("PATCH", `/sweeps/${encodeURIComponent(id)}`, changes),
  curvesFigure: (runs, options = {}) => request(`/figures/curves${query({ runs: runs.join(","), ...options })}`),
  parcoordsFigure: (id) => request(`/sweeps/${encodeURIComponent(id)}/figures/parcoords`),
  importanceFigure: (id) => request(`/sweeps/${encodeURIComponent(id)}/figures/importance`),
};

/**
 * The runs of a `snapshot` event ({columns: [...], runs: [[...], ...]}) as the objects `run`
 * events carry ({id, status, progress, ...}).
 */
export function snapshotRuns(data) {
  return data.runs.map((row) => Object.fromEntries(data.columns.map((column, i) => [column, row[i]])));
}

/**
 * Calls `onRun(run, {snapshot})` for every run change, over Server-Sent Events, falling back to
 * polling `poll()` every 3 s when the stream fails. The stream starts with one compact `snapshot`
 * event (or, for one run, with that run's `run` event); each run in it is passed to `onRun` as
 * well, with `snapshot: true`.
 * Returns a function that stops listening.
 */
export function subscribe(params, onRun, poll) {
  let source = null;
  let timer = null;
  const startPolling = () => {
    if (timer) return;
    timer = setInterval(() => poll().catch(() => {}), 3000);
  };
  if ("EventSource" in window) {
    source = new EventSource(`/api/events${query(params)}`);
    source.addEventListener("snapshot", (e) => snapshotRuns(JSON.parse(e.data)).forEach((run) => onRun(run, { snapshot: true })));
    source.addEventListener("run", (e) => onRun(JSON.parse(e.data)));
    source.onerror = () => { if (source.readyState === EventSource.CLOSED) startPolling(); };
  } else {
    startPolling();
  }
  return () => { source?.close(); clearInterval(timer); };
}
