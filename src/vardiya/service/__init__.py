"""The long-running parts: the scheduler that fires planned ticks and triggers, the work a worker runs
for them, ``vardiya status``, the Prometheus endpoint and structured logs."""
