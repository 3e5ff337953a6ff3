"""The records the experiments leave in results/: typed models (run, chaos,
bench, compare, scale), and store.py, which alone reads and writes them."""
