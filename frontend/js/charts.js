// Draws figure JSON built by the API (dpfl/plots.py) and holds chart interactions only.

const CONFIG = { responsive: true, displaylogo: false };

/** Draws (or redraws) a figure `{data, layout}` into `el`. */
export function draw(el, figure) {
  return window.Plotly.react(el, figure.data, { ...figure.layout, autosize: true }, CONFIG);
}

/** Downloads the chart in `el` as a PNG. */
export function exportPng(el, filename) {
  return window.Plotly.downloadImage(el, { format: "png", filename, width: 1200, height: 700 });
}

/** Calls `handler(customdata)` when a point with customdata is clicked. */
export function onPointClick(el, handler) {
  el.on?.("plotly_click", (ev) => {
    const point = ev.points?.[0];
    if (point?.customdata) handler(point.customdata);
  });
}
