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

const NARROW_PX = 700; // below it, side-by-side panels and a legend on the right leave no plot
const PANEL_ROW_PX = 320; // the height of one stacked panel

/**
 * Returns `layout` fitted to the element's width: with three panels or more, or on a narrow
 * screen, the legend goes under the plot (on the right it took 45 % of the width); on a narrow
 * screen, notion panels side by side (`meta.notions`, the only figures laid out in columns) are
 * stacked one per row, each with the whole width and its own ε axis title and accuracy ticks, and
 * the element grows to hold them. Reference lines and notes follow their panel: they are drawn in
 * its axes' coordinates. Other figures (rows sharing an x axis, one panel) keep their axes.
 * @param {HTMLElement} el @param {Record<string, any>} layout
 */
export function fitted(el, layout) {
  const out = { ...layout, autosize: true };
  const axes = Object.keys(layout).filter((k) => /^xaxis\d*$/.test(k)).sort((a, b) => (a.length - b.length) || a.localeCompare(b));
  const panels = (layout.meta?.notions ?? []).length;
  const narrow = el.clientWidth < NARROW_PX;
  if (narrow || panels >= 3) {
    out.legend = { ...layout.legend, orientation: "h", x: 0, xanchor: "left", y: -0.12, yanchor: "top" };
  }
  el.style.height = "";
  if (!narrow || panels < 2) return out;
  // every pixel to the plot: the y title goes (the chart's title says what y is), thin margins
  out.margin = { ...layout.margin, l: 30, r: 4 };
  const rows = axes.length;
  const gap = 0.12 / rows;
  axes.forEach((x, i) => {
    const n = x.slice("xaxis".length);
    const top = 1 - i / rows;
    const domain = [Math.max(0, top - 1 / rows + gap), top - (i === 0 ? 0 : gap / 2)];
    out[x] = { ...layout[x], domain: [0, 1], anchor: `y${n}` };
    out[`yaxis${n}`] = { ...layout[`yaxis${n}`], ...layout.yaxis, title: { text: "" }, domain, anchor: `x${n}`, showticklabels: true, matches: undefined };
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
