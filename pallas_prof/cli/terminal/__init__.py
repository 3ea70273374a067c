"""In: a run's typed RunReport (cli/report.py), or a ProfileReport seen as one (profile_view).
Out: rich renderables and text sized to the terminal: tables, hot lines, probes, advice.

Imports pallas_prof/units.py, cli/summary.py (the typed kernel rows) and the profiler's and
advice's types, never cli's commands nor cli/html/.
"""
