// Routes the hash to a page module; each page renders into <main> and may return a cleanup.
import { banner } from "./dom.js";
import { current } from "./state.js";
import * as budgets from "./pages/budgets.js";
import * as compare from "./pages/compare.js";
import * as newRun from "./pages/new-run.js";
import * as runDetail from "./pages/run-detail.js";
import * as runs from "./pages/runs.js";

const PAGES = { runs, new: newRun, compare, budgets };
let cleanup = null;
// Renders await the API, so a hash change can start a route before the last one has drawn:
// `started` numbers the routes, `settled` is the last one that finished as the current one.
let started = 0;
let settled = 0;

async function route() {
  const mine = ++started;
  cleanup?.();
  cleanup = null;
  banner(null);
  const { page, id, params } = current();
  const module = page === "runs" && id ? runDetail : PAGES[page] ?? runs;
  for (const a of document.querySelectorAll("header nav a[data-nav]")) {
    a.classList.toggle("active", a.dataset.nav === page);
  }
  const root = document.getElementById("app");
  root.replaceChildren();
  try {
    const done = (await module.render(root, { id, params })) ?? null;
    if (mine !== started) {  // a later route began while this one rendered
      done?.();
      if (settled === started) route();  // and drew first, so this one drew over it: draw it again
      return;
    }
    settled = mine;
    cleanup = done;
  } catch (err) {
    if (mine === started) banner(`Could not load this page: ${err.message}`);
  }
}

window.addEventListener("hashchange", route);
route();
