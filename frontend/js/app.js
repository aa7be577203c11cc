// Routes the hash to a page module; each page renders into its own container in <main> and may
// return a cleanup. A render overtaken by a later route keeps drawing into its container, which
// is detached by then, so it can no longer show anything or set the title; its cleanup runs as
// soon as it returns.
import { banner, h } from "./dom.js";
import { current } from "./state.js";
import * as budgets from "./pages/budgets.js";
import * as compare from "./pages/compare.js";
import * as newRun from "./pages/new-run.js";
import * as runDetail from "./pages/run-detail.js";
import * as runs from "./pages/runs.js";

const PAGES = { runs, new: newRun, compare, budgets };
let active = null;  // {root, cleanup}: the page now shown

async function route() {
  active?.cleanup?.();
  banner(null);
  const { page, id, params } = current();
  const module = page === "runs" && id ? runDetail : PAGES[page] ?? runs;
  for (const a of document.querySelectorAll("header nav a[data-nav]")) {
    a.classList.toggle("active", a.dataset.nav === page);
  }
  const mine = { root: h("div", { class: "page" }), cleanup: null };
  active = mine;
  document.getElementById("app").replaceChildren(mine.root);
  try {
    const cleanup = (await module.render(mine.root, { id, params })) ?? null;
    if (active === mine) mine.cleanup = cleanup;
    else cleanup?.();
  } catch (err) {
    if (active === mine) banner(`Could not load this page: ${err.message}`);
  }
}

window.addEventListener("hashchange", route);
route();
