#!/usr/bin/env bash
# Each fuzz reproducer under DIR (and DIR/unshrunk) run in a process of its own on the
# GPU, JOBS at a time: a finding that holds there is the kernel's; one that does not came
# from what ran before it in the fuzzer's process.
#   bash bench/probes/repros_fresh.sh DIR [JOBS]
dir=${1:?a folder of repro_*.py}; jobs=${2:-8}
ls "$dir"/repro_*.py "$dir"/unshrunk/repro_*.py 2>/dev/null | xargs -P "$jobs" -I{} sh -c \
  'timeout 90 python3 bench/probes/fuzz_repro_gpu.py {} --runs 2 --seeds 1 2>/dev/null | tr "\n" " " | sed "s|^|$(basename {}): |"; echo'
