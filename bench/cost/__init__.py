"""What a feature costs or gains, timed against going without it: check mode, tuning, tracing,
TMA, launch order, the way around Triton's scan bug."""
