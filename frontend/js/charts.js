// Draws figure JSON built by the API (dpfl/plots.py) and holds chart interactions only.

const CONFIG = { responsive: true, displaylogo: false };
// Plotly (1.4 MB: our bundle of the trace types we draw) is fetched only by pages that draw, so
// pages without charts never load it. The server redirects this URL to a versioned one the
// browser caches for good (backend/assets.py).
const PLOTLY_SRC = "/vendor/plotly.min.js";
let plotly = null;

/** Resolves to window.Plotly, inserting its <script> once. */
function loadPlotly() {
  plotly ??= new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = PLOTLY_SRC;
    script.onload = () => resolve(window.Plotly);
    script.onerror = () => { plotly = null; reject(new Error("could not load the chart library (Plotly)")); };
    document.head.append(script);
  });
  return plotly;
}

/**
 * Starts fetching and evaluating Plotly now, for a page that will draw: it then loads while the
 * page waits for its data, not after. A failure shows on the first draw.
 */
export function preloadCharts() {
  loadPlotly().catch(() => {});
}

/** Draws (or redraws) a figure `{data, layout}` into `el`; `config` adds to Plotly's (e.g. no mode bar). */
export async function draw(el, figure, config = {}) {
  const Plotly = await loadPlotly();
  return Plotly.react(el, figure.data, fitted(el, figure.layout, figure.data), { ...CONFIG, ...config });
}

const NARROW_PX = 700; // below it, a legend on the right leaves no plot
const MIN_PANEL_PX = 300; // a narrower panel shows neither its points apart nor its ε ticks
const PANEL_GAP = 0.06; // between panels side by side, as the server lays them out (dpfl/plots/notions.py)
const MARGINS_PX = 110; // the y ticks' and margins' share of the width
const PANEL_ROW_PX = 320; // the height of one row of panels

/** Returns how many notion panels fit side by side in `width` px, each at least MIN_PANEL_PX
 * wide, balanced over the rows they then need (4 panels: 2 × 2, not 3 + 1). */
export function panelColumns(width, panels) {
  const plot = width - MARGINS_PX;
  let columns = panels;
  while (columns > 1 && (plot * (1 - (columns - 1) * PANEL_GAP)) / columns < MIN_PANEL_PX) columns -= 1;
  return Math.ceil(panels / Math.ceil(panels / columns));
}

const AXIS_BELOW_PX = 52; // the x tick labels and the x title under the plot
const LEGEND_ROW_PX = 21;
const CHAR_PX = 7; // the width of one character of a legend entry or subtitle at 13 px
const TITLE_CHAR_PX = 10;
const TITLE_LINE_PX = 18;

/** Returns the legend's entries: named traces and shapes that show in it. */
function legendNames(layout, data) {
  const traces = data.filter((t) => t.showlegend ?? (data.length > 1 && layout.showlegend !== false));
  const shapes = (layout.shapes ?? []).filter((s) => s.showlegend);
  return [...traces, ...shapes].map((t) => t.name ?? "");
}

/** Returns how many rows a horizontal legend of `names` takes in `width` px. */
function legendRows(names, width) {
  let rows = names.length ? 1 : 0;
  let used = 0;
  for (const name of names) {
    const entry = 48 + CHAR_PX * name.length; // its line sample, gap and text
    if (used && used + entry > width) { rows += 1; used = 0; }
    used += entry;
  }
  return rows;
}

/** Returns `text` broken with <br> into lines of at most `chars` characters, at spaces. */
function wrapped(text, chars) {
  const lines = [];
  for (const word of String(text).split(" ")) {
    const last = lines.length - 1;
    if (last >= 0 && (lines[last] + " " + word).length <= chars) lines[last] += " " + word;
    else lines.push(word);
  }
  return lines;
}

/**
 * Returns `layout` fitted to the element's width.
 *
 * - With three panels or more, or on a narrow screen, the legend goes under the plot (on the
 *   right it took 45 % of the width), below the x axis title: it is placed in the container's
 *   coordinates, the bottom margin holds its rows, and the element grows by as much, so the plot
 *   keeps its height.
 * - Notion panels side by side (`meta.notions`, the only figures laid out in columns) that would
 *   be narrower than MIN_PANEL_PX go in a grid (one per row on a phone), each with its own ε axis
 *   title and accuracy ticks, and the element grows to hold the rows. Reference lines and notes
 *   follow their panel: they are drawn in its axes' coordinates. Other figures (rows sharing an
 *   x axis, one panel) keep their axes.
 * - On a narrow screen a title or subtitle too long for the width is wrapped, not clipped.
 * @param {HTMLElement} el @param {Record<string, any>} layout @param {any[]} data
 */
export function fitted(el, layout, data = []) {
  const out = { ...layout, autosize: true, margin: { ...layout.margin } };
  const axes = Object.keys(layout).filter((k) => /^xaxis\d*$/.test(k)).sort((a, b) => (a.length - b.length) || a.localeCompare(b));
  const panels = (layout.meta?.notions ?? []).length;
  const width = el.clientWidth;
  const narrow = width < NARROW_PX;
  el.style.height = "";
  let height = el.clientHeight;
  const columns = panels < 2 ? panels : panelColumns(width, panels);
  if (columns < panels) {
    const rows = Math.ceil(panels / columns);
    // one column: every pixel to the plot, the y title goes (the chart's title says what y is)
    if (columns === 1) Object.assign(out.margin, { l: 30, r: 4 });
    const gap = 0.12 / rows;
    axes.forEach((x, i) => {
      const n = x.slice("xaxis".length);
      const row = Math.floor(i / columns);
      const col = i % columns;
      const left = col / columns;
      const top = 1 - row / rows;
      const domain = [left + (col ? PANEL_GAP / 2 : 0), left + 1 / columns - (col < columns - 1 ? PANEL_GAP / 2 : 0)];
      out[x] = { ...layout[x], domain, anchor: `y${n}` };
      out[`yaxis${n}`] = {
        ...layout[`yaxis${n}`], ...layout.yaxis, title: col === 0 && columns > 1 ? layout.yaxis?.title : { text: "" },
        domain: [Math.max(0, top - 1 / rows + gap), top - (row === 0 ? 0 : gap / 2)], anchor: `x${n}`, showticklabels: true, matches: undefined,
      };
    });
    height = rows * PANEL_ROW_PX;
  }
  if (narrow && layout.title) {
    const title = wrapped(layout.title.text ?? "", Math.floor(width / TITLE_CHAR_PX));
    const subtitle = wrapped(layout.title.subtitle?.text ?? "", Math.floor(width / CHAR_PX));
    out.title = { ...layout.title, text: title.join("<br>") };
    if (layout.title.subtitle) out.title.subtitle = { ...layout.title.subtitle, text: subtitle.join("<br>") };
    const extra = TITLE_LINE_PX * (Math.max(0, title.length - 1) + Math.max(0, subtitle.length - 1));
    out.margin.t = (out.margin.t ?? 80) + extra;
    height += extra;
  }
  if (narrow || panels >= 3) {
    const rows = legendRows(legendNames(layout, data), width - 20);
    out.legend = { ...layout.legend, orientation: "h", x: 0, xanchor: "left", xref: "container", y: 0, yanchor: "bottom", yref: "container" };
    const below = rows * LEGEND_ROW_PX + 8;
    out.margin.b = AXIS_BELOW_PX + below;
    height += below;
  }
  if (height !== el.clientHeight) el.style.height = `${height}px`;
  return out;
}

/**
 * Fetches and draws a figure once `el` is scrolled near the screen: charts below the fold (a
 * sweep's parallel coordinates, drawn in WebGL) would otherwise hold the page's main thread
 * while the chart the user looks at waits to be painted. Resolves once it is drawn.
 * @param {HTMLElement} el @param {() => Promise<any>} fetchFigure
 */
export function drawWhenVisible(el, fetchFigure) {
  return new Promise((resolve, reject) => {
    const observer = new IntersectionObserver((entries) => {
      if (!entries.some((e) => e.isIntersecting)) return;
      observer.disconnect();
      fetchFigure().then((figure) => draw(el, figure)).then(resolve, reject);
    }, { rootMargin: "200px" });
    observer.observe(el);
  });
}

/** Downloads the chart in `el` as a PNG. */
export async function exportPng(el, filename) {
  const Plotly = await loadPlotly();
  return Plotly.downloadImage(el, { format: "png", filename, width: 1200, height: 700 });
}

/** Calls `handler(customdata)` when a point with customdata is clicked. */
export function onPointClick(el, handler) {
  el.on?.("plotly_click", (ev) => {
    const point = ev.points?.[0];
    if (point?.customdata) handler(point.customdata);
  });
}
