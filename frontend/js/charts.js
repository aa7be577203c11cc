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
  return Plotly.react(el, figure.data, { ...figure.layout, autosize: true }, CONFIG);
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
