// The view's state lives in the URL hash (#/page?key=value), so a link reproduces a view.

/** Returns {page, id, params} parsed from location.hash. */
export function current() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, search = ""] = raw.split("?");
  const [page = "runs", id = null] = path.split("/").filter(Boolean);
  return { page, id, params: Object.fromEntries(new URLSearchParams(search)) };
}

/**
 * Replaces the hash's query with `params` (no navigation event, no history entry), unless
 * `owner`, an element of the page asking, has left the document: a render overtaken by a later
 * route must not rewrite that route's URL (a late runs list once turned #/new?mode=sweep into
 * #/new?sort=…, the New run form).
 */
export function setParams(params, owner) {
  if (!owner.isConnected) return;
  const { page, id } = current();
  const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== ""));
  const hash = `#/${page}${id ? `/${id}` : ""}${q.toString() ? `?${q}` : ""}`;
  history.replaceState(null, "", hash);
}

/** Navigates to a page. */
export function go(page, params = {}) {
  const q = new URLSearchParams(params).toString();
  location.hash = `#/${page}${q ? `?${q}` : ""}`;
}
