// Named saved views of a list page: a name ↦ the page's URL query (filters, sort, columns), kept in
// this browser (localStorage). A view opens with one click and is still a link to share.
import { h, replace } from "./dom.js";
import { current } from "./state.js";

const KEY = "dpfl.views";

/** This browser's saved views of `page`, {name: query}. */
export function savedViews(page) {
  try {
    return JSON.parse(localStorage.getItem(KEY) ?? "{}")[page] ?? {};
  } catch {
    return {};  // a damaged entry holds no views
  }
}

function store(page, views) {
  let all = {};
  try { all = JSON.parse(localStorage.getItem(KEY) ?? "{}"); } catch { /* replaced below */ }
  all[page] = views;
  localStorage.setItem(KEY, JSON.stringify(all));
}

/** The Views menu of `page`: each saved view as a link (with a × to forget it), and a box to save the view shown now. */
export function viewsMenu(page) {
  const list = h("ul", { class: "views-list" });
  const name = h("input", { type: "text", name: "view-name", placeholder: "name this view", "aria-label": "name of the view to save", maxlength: 60 });
  const said = h("small", { class: "muted views-said", role: "status" });
  const draw = () => {
    const views = savedViews(page);
    replace(list, ...Object.entries(views).map(([title, query]) => h("li", {},
      h("a", { href: `#/${page}${query ? `?${query}` : ""}` }, title), " ",
      h("button", { type: "button", class: "link", "aria-label": `forget the view ${title}`, onclick: () => {
        const rest = { ...savedViews(page) };
        delete rest[title];
        store(page, rest);
        draw();
      } }, "×"))));
    if (!Object.keys(views).length) list.append(h("li", { class: "muted" }, "none saved yet"));
  };
  const save = () => {
    const title = name.value.trim();
    if (!title) { said.textContent = "give the view a name first."; return; }
    const query = new URLSearchParams(current().params).toString();
    store(page, { ...savedViews(page), [title]: query });
    said.textContent = `saved “${title}”.`;
    name.value = "";
    draw();
  };
  name.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); save(); } });
  draw();
  return h("details", { class: "views-menu" }, h("summary", {}, "Views"), h("div", { class: "views-panel" }, list,
    h("div", { class: "toolbar" }, name, h("button", { type: "button", onclick: save }, "Save this view")), said));
}
