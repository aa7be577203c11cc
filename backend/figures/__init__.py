"""Figure JSON for the browser, built by dpfl.plots from the same data the API serves."""
