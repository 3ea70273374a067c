"""The differential fuzzer: random Pallas programs (programs.py, hazards.py, scans.py) checked
against XLA or JAX's Pallas interpreter (check.py, with the op-by-op, rounded and scan-order
references), compiled for sm_90 (sm90.py, whose SASS sass_hazards.py reads) and for a second
target (second_target.py). tests/fuzz runs a fixed set of it; bench/fuzz runs it for as long as
you like."""
