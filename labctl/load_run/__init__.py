"""One load run (`make load`), step by step, and what every experiment that
drives load builds on: compare, sweep, scale and chaos construct a LoadOptions
and call run_load, which returns the run's record."""
