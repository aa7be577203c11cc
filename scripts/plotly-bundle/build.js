// Builds backend/vendor/plotly.min.js with plotly.js's own esbuild settings (its
// esbuild-config.js), minified, from entry.js. Run by `make plotly-bundle`.
const path = require('path');
const esbuild = require('esbuild');
const { environmentPlugin } = require('esbuild-plugin-environment');
const { glsl } = require('esbuild-plugin-glsl');
const InlineCSSPlugin = require('esbuild-plugin-inline-css');
const { version } = require('plotly.js/package.json');

esbuild
  .build({
    entryPoints: [path.join(__dirname, 'entry.js')],
    outfile: path.join(__dirname, '..', '..', 'backend', 'vendor', 'plotly.min.js'),
    banner: { js: `/**\n* plotly.js v${version} (scatter, bar, parcoords)\n* Copyright 2012-2026, Plotly, Inc.\n* Licensed under the MIT license\n*/` },
    format: 'iife',
    globalName: 'Plotly',
    bundle: true,
    minify: true,
    plugins: [InlineCSSPlugin(), glsl({ minify: true }), environmentPlugin({ NODE_DEBUG: false })],
    alias: { regl: '@plotly/regl', stream: 'stream-browserify' },
    define: { global: 'window', 'define.amd': 'false' },
    target: 'es2016',
    logLevel: 'warning',
  })
  .catch(() => process.exit(1));
