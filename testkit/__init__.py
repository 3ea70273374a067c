"""testkit: the code the test suite (tests/) and the benchmarks (bench/) share (issue 50, item 6).

What is here: the differential fuzzer (testkit/fuzz: the program generator, the checker and
its references, the sm_90 and second-target compiles, the SASS hazard reader, the scans),
the helpers that run kernels against XLA (helpers.py), the suite's pytest setup
(suite_setup.py: private cache, run seed, GPU skips, per-test guards), the examples lowered
for the tests and the bench scripts (examples.py), the kernels that meet what a target lacks
(target_kernels.py) and user scripts the tests and probes run (scripts.py).

Why a top-level package of the repository, beside tests/ and bench/:
- a benchmark must not import a test module, and a test module must not be a library; this
  is the one place both import from. The imports go one way: tests/ and bench/ import
  testkit, testkit imports neither (tests/structure/test_bench_direction.py checks all three
  directions, and that pallas_prof/ never imports it).
- it is found the way tests/ and bench/ are: from the repository root on sys.path (pytest's
  rootdir with the tests' `tests/__init__.py` packages, and `PYTHONPATH=$PWD` for the bench
  scripts, as bench/gpu_session.sh runs them on the GPU machine). No install step, nothing
  new to carry to the GPU machine: it travels with the working tree.
- it is not shipped: pyproject.toml's package discovery includes `pallas_prof*` only, so a
  user's `pip install pallas-prof` never gets a top-level `testkit` package. (A subpackage
  of pallas_prof would ship the fuzzer and pull hypothesis into the library's imports.)
"""
