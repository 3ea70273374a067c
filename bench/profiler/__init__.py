"""The profiler's own GPU checks: replay timing, ncu, NVML and CUPTI in one session
(profiler_gpu_check.py), and issue 16's one-call proof of the in-kernel probes."""
