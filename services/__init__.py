"""Code shared by the lab's API and its queue workers."""
