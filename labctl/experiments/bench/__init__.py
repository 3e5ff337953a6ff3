"""make bench: what the lab costs next to each library on its own."""
