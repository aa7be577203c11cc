// Budgets: each dataset's total ε, what is spent, reserved and remaining, and the runs that spent it.
import { ApiError, api } from "../api.js";
import { banner, fmt, h, replace } from "../dom.js";

export async function render(root) {
  const list = h("div");
  async function load() {
    const budgets = await api.listBudgets();
    replace(list, budgets.length ? budgets.map((b) => h("div", { class: "card", dataset: { dataset: b.dataset } },
      h("h2", {}, b.dataset),
      h("dl", { class: "kv" }, h("dt", {}, "total ε"), h("dd", {}, fmt(b.total_epsilon)), h("dt", {}, "spent"), h("dd", {}, fmt(b.spent, 4)),
        h("dt", {}, "reserved"), h("dd", {}, fmt(b.reserved, 4)), h("dt", {}, "remaining"), h("dd", { class: "remaining" }, fmt(b.remaining, 4))),
      b.silos ? h("table", { class: "grid silos" }, h("thead", {}, h("tr", {}, ["silo", "spent", "reserved", "remaining"].map((c) => h("th", {}, c)))),
        h("tbody", {}, Object.entries(b.silos).map(([name, s]) => h("tr", {}, h("td", {}, name), h("td", { class: "num" }, fmt(s.spent, 4)),
          h("td", { class: "num" }, fmt(s.reserved, 4)), h("td", { class: "num" }, fmt(s.remaining, 4)))))) : null,
      h("table", { class: "grid" }, h("thead", {}, h("tr", {}, ["run", "reserved", "spent", "settled"].map((c) => h("th", {}, c)))),
        h("tbody", {}, b.charges.map((c) => h("tr", {}, h("td", {}, h("a", { href: `#/runs/${c.run_id}` }, c.run_id)),
          h("td", { class: "num" }, fmt(c.reserved)), h("td", { class: "num" }, fmt(c.spent, 4)), h("td", {}, c.settled ? "yes" : "no"))))))) 
      : h("p", { class: "muted" }, "No dataset has a budget yet."));
  }
  const name = h("input", { name: "dataset", placeholder: "dataset, e.g. heart" });
  const total = h("input", { name: "total", type: "number", step: "any", min: 0, placeholder: "total ε" });
  replace(root, h("h1", {}, "Privacy budgets"),
    h("form", { class: "toolbar", onsubmit: async (e) => {
      e.preventDefault();
      try { await api.putBudget(name.value.trim(), Number(total.value)); await load(); }
      catch (err) { banner(`Could not set the budget: ${err instanceof ApiError && Array.isArray(err.detail) ? err.detail.map((d) => d.msg).join("; ") : err.message}`); }
    } }, h("label", {}, "dataset", name), h("label", {}, "total ε", total), h("button", { class: "primary", type: "submit" }, "Set budget")),
    list);
  await load();
}
