"""The kernels a test runs, gated against a stored baseline (`pytest --pallas-prof`).

    figures.py    a kernel's figures as the gate keeps them: registers, spills, shared
                  memory, instructions per equation, the work model, replay time (GPU)
    baseline.py   one JSON file per test: written whole, read back as data to check
    compare.py    baseline against now, and the marker's budgets: what grew, where
    timing.py     replay time on a GPU, repeated, with its noise
    session.py    the pytest hooks that run all of it, registered only with --pallas-prof

pallas_prof/pytest_plugin.py, the module the `pytest11` entry point names, imports none
of these unless --pallas-prof is given: a project that never passes it pays nothing.
"""
