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

async function route() {
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
    cleanup = (await module.render(root, { id, params })) ?? null;
  } catch (err) {
    banner(`Could not load this page: ${err.message}`);
  }
}

window.addEventListener("hashchange", route);
route();
