"""What the experiments show: one markdown table, one console (rich), one chart
stack (matplotlib), and the pages and tables of each record."""
