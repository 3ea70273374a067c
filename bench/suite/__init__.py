"""Speed: the canonical suite (suite.py, its cases, the GPU's clock while a column runs) and the
benchmarks it grew from (ops_vs_builtin.py, also the op library of first_call/ and probes/)."""
