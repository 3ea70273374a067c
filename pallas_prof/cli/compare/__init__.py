"""`pallas-prof diff A B`: two saved runs compared, their kernels' figures (diff.py, by the
rules pallas_prof/comparison.py shares with the pytest gate) and whether run A's advice
held in run B (advice_diff.py)."""
