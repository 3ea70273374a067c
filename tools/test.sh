#!/usr/bin/env bash
# pallas-prof's test command (the README's; .ci/run runs exactly this): the
# suite on the oldest and the newest supported releases, each leg in a virtual
# environment of its own, made here on first use and reused after.
#
#   leg A  .venv-a  the machine's python3 (3.11)  jax 0.10.2  triton 3.6  the whole suite
#   leg B  .venv-b  Python 3.12                   jax 0.12.x  triton 3.9  the version-sensitive part
#
# Leg B runs the tests that touch what differs between releases: lowering and
# compiling (backend/: jaxprs, Triton's stages, ptxas, line info, the
# interpreter), the profiler's correlation of IR and SASS, the CLI end to end,
# spans, and the removal drill (on this leg only); it leaves out what does not depend on JAX or
# Triton (the tuner's search, the HTML report's browser test, the OTLP receiver,
# the long fuzz sets, the file-handling faults below), which leg A covers. Both must pass.
#
# Environment: LEGS="a b" (default) picks legs; PYTEST_ARGS adds pytest options;
# PALLAS_PROF_NO_RECEIVER_INSTALL=1 skips the OTLP receiver tests (they install
# Arize Phoenix, ~850 MB, into $XDG_CACHE_HOME/pallas-prof/phoenix-venv once).
set -euo pipefail
cd "$(dirname "$0")/.."
LEGS=${LEGS:-a b}
START=$SECONDS

# What this command does besides testing, said before it is done, with how to skip each.
cache_home=${XDG_CACHE_HOME:-$HOME/.cache}
if [ "${PALLAS_PROF_NO_BROWSER_INSTALL:-0}" != 1 ] && ! command -v chromium >/dev/null 2>&1 \
   && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "== the report.html browser tests need Debian's chromium: installing it now with apt-get"
  echo "   (skip: PALLAS_PROF_NO_BROWSER_INSTALL=1; the browser tests are then skipped)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq && apt-get install -y -qq chromium >/dev/null
elif ! command -v chromium >/dev/null 2>&1; then
  echo "== no chromium (and not installing it): the report.html browser tests will be skipped"
fi
if [ "${PALLAS_PROF_NO_RECEIVER_INSTALL:-0}" != 1 ] && [ -z "${PALLAS_PROF_PHOENIX:-}" ] \
   && [ ! -x "$cache_home/pallas-prof/phoenix-venv/bin/phoenix" ]; then
  echo "== the OTLP receiver tests will install Arize Phoenix (about 850 MB, once) into"
  echo "   $cache_home/pallas-prof/phoenix-venv (skip: PALLAS_PROF_NO_RECEIVER_INSTALL=1)"
fi
echo "== the test legs each make a virtual environment here (.venv-a, .venv-b) on first use"

python312() {   # pyenv's python3.12 need not be on PATH (pyenv's shim refuses it unless selected)
  if python3.12 --version >/dev/null 2>&1; then command -v python3.12; return; fi
  local p
  for p in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 /usr/bin/python3.12 \
           /usr/local/bin/python3.12; do
    if [ -x "$p" ]; then echo "$p"; return; fi
  done
  echo "no Python 3.12 found (leg B needs one: pyenv install 3.12, or set PYTHON312)" >&2
  return 1
}

# leg NAME PYTHON "PINS" TESTS...: make or reuse .venv-NAME, install the pins
# first and pallas-prof after (which must leave them as they are), run pytest.
leg() {
  local name=$1 python=$2 pins=$3; shift 3
  local venv=.venv-$name t0=$SECONDS
  echo "== leg $name: $($python --version 2>&1), $pins"
  if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv" || return 1
  fi
  # shellcheck disable=SC2086 # the pins are words on purpose
  "$venv/bin/python" -m pip install -q --disable-pip-version-check $pins || return 1
  local before after
  before=$("$venv/bin/python" -m pip freeze 2>/dev/null | grep -iE '^(jax|jaxlib|triton)==' | sort)
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -e '.[test]' || return 1
  after=$("$venv/bin/python" -m pip freeze 2>/dev/null | grep -iE '^(jax|jaxlib|triton)==' | sort)
  if [ "$before" != "$after" ]; then
    echo "installing pallas-prof changed jax/jaxlib/triton:"; echo "$before"; echo "->"; echo "$after"
    return 1
  fi
  echo "   $(echo $after | tr '\n' ' ')(unchanged by installing pallas-prof; $((SECONDS - t0)) s to set up)"
  # --durations: the log names the slowest tests, where the legs' time goes (both legs
  # together are to stay under 30 minutes on a 2-core machine)
  # shellcheck disable=SC2086
  "$venv/bin/python" -m pytest -q -n auto -p no:cacheprovider --durations=30 ${PYTEST_ARGS:-} "$@" || {
    echo "== leg $name FAILED (pytest exit $?) after $((SECONDS - t0)) s"; return 1; }
  echo "== leg $name passed in $((SECONDS - t0)) s"
}

# The hostile world's tests of pallas-prof's own files (tuning files and kernel caches read
# back damaged or written by two processes at once, run folders and their writes, fifos,
# gate baselines, secrets' spellings) and the span exporters' volume test: what they test
# is pallas-prof's file handling and OpenTelemetry's, the same on every JAX and Triton, and
# they were a third of leg B's time. Leg A runs them; leg B keeps the faults that touch
# lowering, compiling, Triton's own caches, the compile worker and signals.
FILE_HANDLING=(tests/faults/test_tuning_files.py tests/faults/test_run_writes.py
  tests/faults/test_run_directory.py tests/faults/test_fifo.py
  tests/faults/test_baseline_writers.py tests/faults/test_baselines.py
  tests/faults/test_secret_forms.py tests/faults/test_caches.py
  tests/instrument/test_exporters.py)

run_leg() {
  case $1 in
    # the removal drill (tests/removal/test_drill.py: pytest again in a copy, minutes of CPU)
    # runs on leg B only: JAX removes its Triton backend in a release after the newest one
    # supported, so the newest JAX is the one the drill stands in for; every file it
    # selects runs on both legs as usual
    a) leg a "${PYTHON311:-python3}" "jax==0.10.2 jaxlib==0.10.2 triton==3.6.*" tests bench/tests \
         --ignore=tests/removal/test_drill.py ;;
    b) leg b "${PYTHON312:-$(python312)}" "jax==0.12.* jaxlib==0.12.* triton==3.9.*" \
         tests/backend tests/profiler tests/cli tests/instrument tests/test_structure.py \
         tests/test_jax_kernels.py tests/test_versions.py tests/test_import_errors.py \
         tests/removal tests/fuzz/test_fuzz.py tests/faults tests/test_safe_files.py \
         bench/tests/test_saved_kernels_for_targets.py bench/tests/test_examples_for_targets.py \
         bench/tests/test_packed_int16_adds.py \
         --ignore=tests/cli/test_html_browser.py "${FILE_HANDLING[@]/#/--ignore=}" \
         -m "not otlp_receiver" ;;
    *) echo "unknown leg $1 (a or b)"; return 2 ;;
  esac
}

failed=""
# every leg runs, whatever the one before it did. Each step's status is checked by
# hand: `set -e` does nothing inside a command whose status `||` tests (bash ignores
# it there), which once let a leg with failing tests say it passed.
for l in $LEGS; do
  run_leg "$l" || failed="$failed $l"
done
if [ -n "$failed" ]; then
  echo "== FAILED leg(s):$failed ($((SECONDS - START)) s in all)"
  exit 1
fi
echo "== all legs passed in $((SECONDS - START)) s"
