"""What the lab shows of itself, beside the experiments: the runs' records
(`make results`), a run's figure (`make report`), the limits the engine applied
(`make limits`) and Locust's own web UI against the lab (`make locust-ui`)."""
