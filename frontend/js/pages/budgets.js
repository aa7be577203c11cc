// Budgets: each dataset's total ε in its unit (δ, notion, relation), what is spent, reserved and
// remaining, and the runs that spent it.
import { api } from "../api.js";
import { fmt, h, replace, setTitle } from "../dom.js";
import { datasetChoices } from "../datasets.js";
import { clearError, field, showErrors } from "../spec-form.js";

const table = (className, columns, rows) => h("div", { class: "table-scroll" },
  h("table", { class: `grid ${className}` }, h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))), h("tbody", {}, rows)));

/** One dataset's budget: totals, per-silo balances, charges, and its Delete button. */
function card(b, onDelete) {
  const refusal = h("p", { class: "error-text delete-error", role: "alert" });
  return h("div", { class: "card", dataset: { dataset: b.dataset } },
    h("h2", {}, b.dataset, " ", h("button", { class: "danger delete", "aria-label": `delete the budget of ${b.dataset}`,
      onclick: () => onDelete(b.dataset, refusal) }, "Delete")),
    refusal,
    h("dl", { class: "kv" }, h("dt", {}, "unit"), h("dd", { class: "unit" }, b.notion ? b.unit : `${b.unit}, per the notion of the first run charged`),
      h("dt", {}, "test metrics"), h("dd", { class: "test-split" }, b.public_test ? "served: the test split is public" : "withheld: the test split is under the budget"),
      h("dt", {}, "total ε"), h("dd", {}, fmt(b.total_epsilon)), h("dt", {}, "spent"), h("dd", {}, fmt(b.spent, 4)),
      h("dt", {}, "reserved"), h("dd", {}, fmt(b.reserved, 4)), h("dt", {}, "remaining"), h("dd", { class: "remaining" }, fmt(b.remaining, 4))),
    b.silos ? table("silos", ["silo", "spent", "reserved", "remaining"], Object.entries(b.silos).map(([name, s]) => h("tr", {}, h("td", {}, name),
      h("td", { class: "num" }, fmt(s.spent, 4)), h("td", { class: "num" }, fmt(s.reserved, 4)), h("td", { class: "num" }, fmt(s.remaining, 4))))) : null,
    table("charges", ["run", "reserved", "spent", "settled"], b.charges.map((c) => h("tr", {}, h("td", {}, h("a", { href: `#/runs/${c.run_id}` }, c.run_id)),
      h("td", { class: "num" }, fmt(c.reserved)), h("td", { class: "num" }, fmt(c.spent, 4)), h("td", {}, c.settled ? "yes" : "no")))));
}

export async function render(root) {
  setTitle("Budgets", root);
  const choices = datasetChoices(await api.datasets());
  const list = h("div");
  async function load() {
    const budgets = await api.listBudgets();
    replace(list, budgets.length ? budgets.map((b) => card(b, remove)) : h("p", { class: "muted" }, "No dataset has a budget yet."));
  }
  async function remove(dataset, refusal) {
    refusal.textContent = "";
    try { await api.deleteBudget(dataset); await load(); } catch (err) { refusal.textContent = `Could not delete the budget: ${err.message}`; }
  }
  const name = h("select", { name: "dataset", required: true },
    h("option", { value: "" }, "choose a dataset"), choices.map((c) => h("option", { value: c.value }, c.text)));
  const total = h("input", { name: "total", type: "number", step: "any", min: 0, required: true });
  const delta = h("input", { name: "delta", type: "text", inputmode: "decimal", placeholder: "1e-5" });
  const publicTest = h("input", { name: "public_test", type: "checkbox" });
  const formError = h("p", { class: "error-text form-error", role: "alert" });
  const form = h("form", { class: "toolbar budget-form", novalidate: true, oninput: (e) => clearError(e.target), onsubmit: async (e) => {
    e.preventDefault();
    if (!name.value) return refuse({ dataset: "dataset: choose the dataset the budget is for." });
    if (total.value === "" || !(Number(total.value) >= 0)) return refuse({ total: `total ε: must be a number ≥ 0; got ${JSON.stringify(total.value)}.` });
    const body = { total_epsilon: Number(total.value) };
    if (publicTest.checked) body.public_test = true;  // unticked leaves an existing declaration as it is
    if (delta.value.trim() !== "") {
      body.delta = Number(delta.value);
      if (!(body.delta > 0 && body.delta < 1)) return refuse({ delta: `δ: must be a number in (0, 1); got ${JSON.stringify(delta.value)}.` });
    }
    try {
      await api.putBudget(name.value, body);
      refuse({});  // a success clears what an earlier attempt said
      await load();
    } catch (err) {
      const fields = err.fields ?? {};
      const beside = { ...(fields.total_epsilon && { total: `Could not set the budget: ${fields.total_epsilon}` }), ...(fields.delta && { delta: `Could not set the budget: ${fields.delta}` }) };
      refuse(beside, `Could not set the budget: ${err.message}`);
    }
  } }, field("dataset", "dataset", name), field("total ε", "total", total), field("δ", "delta", delta),
  field("test split public", "public_test", publicTest, "its runs' test metrics are served"),
  h("button", { class: "primary", type: "submit" }, "Set budget"));

  /** Shows `fields` errors beside their fields (focusing the first) and `message` under the form; `{}` clears them. */
  function refuse(fields, message = "") {
    showErrors(form, fields);
    formError.textContent = Object.keys(fields).length ? "" : message;
    form.querySelector(".field.invalid :is(input, select)")?.focus();
  }

  replace(root, h("h1", {}, "Privacy budgets"), form, formError, list);
  await load();
}
