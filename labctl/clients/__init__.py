"""What the experiments ask over HTTP: Prometheus, Grafana, and the lab's own API."""
