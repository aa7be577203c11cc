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

/** Draws (or redraws) a figure `{data, layout}` into `el`. */
export async function draw(el, figure) {
  const Plotly = await loadPlotly();
  return Plotly.react(el, figure.data, fitted(el, figure.layout), CONFIG);
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

/**
 * Returns `layout` fitted to the element's width: with three panels or more, or on a narrow
 * screen, the legend goes under the plot (on the right it took 45 % of the width). Notion panels
 * side by side (`meta.notions`, the only figures laid out in columns) that would be narrower
 * than MIN_PANEL_PX are laid out in a grid (one per row on a phone), each with its own ε axis
 * title and accuracy ticks, and the element grows to hold the rows. Reference lines and notes
 * follow their panel: they are drawn in its axes' coordinates. Other figures (rows sharing an x
 * axis, one panel) keep their axes.
 * @param {HTMLElement} el @param {Record<string, any>} layout
 */
export function fitted(el, layout) {
  const out = { ...layout, autosize: true };
  const axes = Object.keys(layout).filter((k) => /^xaxis\d*$/.test(k)).sort((a, b) => (a.length - b.length) || a.localeCompare(b));
  const panels = (layout.meta?.notions ?? []).length;
  const width = el.clientWidth;
  if (width < NARROW_PX || panels >= 3) {
    out.legend = { ...layout.legend, orientation: "h", x: 0, xanchor: "left", y: -0.12, yanchor: "top" };
  }
  el.style.height = "";
  const columns = panels < 2 ? panels : panelColumns(width, panels);
  if (columns >= panels) return out;
  const rows = Math.ceil(panels / columns);
  // one column: every pixel to the plot, the y title goes (the chart's title says what y is)
  if (columns === 1) out.margin = { ...layout.margin, l: 30, r: 4 };
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
  el.style.height = `${rows * PANEL_ROW_PX}px`;
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
