"""In: a kernel's LaunchSpec on a GPU (driver.py), or the user's program under CUPTI (insitu.py).
Out: RuntimeStats (replayed, checked), NvmlWindow, Ceilings and Rates, InsituStats.

Imports no other room of the profiler; sampling/ and probes/ replay through its Replayer.
"""
