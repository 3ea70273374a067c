"""One-off GPU probes: each answered one question; bench/results/archive/README.md has what they found."""
