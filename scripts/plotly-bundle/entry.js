// The trace types the dashboard's figures use (dpfl/plots, backend figure routes). Plotly's core
// always carries scatter; tests/backend/test_plotly_bundle.py fails when a figure needs another.
var Plotly = require('plotly.js/lib/core');

Plotly.register([require('plotly.js/lib/bar'), require('plotly.js/lib/parcoords')]);

module.exports = Plotly;
