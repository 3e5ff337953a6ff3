"""The experiments, one module (or package) each: none imports another. Those
that drive load build on labctl/load_run's run_load and the record it returns."""
