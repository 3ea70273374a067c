"""The `pallas-prof` command.

Its commands (main.py dispatches run, show, diff, report, ...) make or read a run's typed
RunReport (report.py) and its run directory (run_directory.py). Two views render a report:
terminal/ (rich, sized to the console) and html/ (report.html); they read report.py's types,
the package's units.py and the run directory's files, and import neither a command nor each other.
"""
