"""Measurement helpers that are not experiments: what a scrape costs, how fast
each queue's worker empties a backlog on the host."""
