"""In: a replay's PC samples (CUPTI) or Nsight Compute's counters, and static/'s correlation.
Out: the Attribution: the equations and user lines the time goes to, stalls charged to causes.

Imports static/ and timing/, never probes/.
"""
