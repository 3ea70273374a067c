"""The steps of a run (`pallas-prof run` and `advise`; cli/run.py puts them in order):
what watches the script while it runs (capture.py), what is done with its kernels after
it (kernels.py: selected, compiled, profiled, advised on, notes on their failures), and
report.json's entries made from the records (entries.py)."""
