"""What Proton (triton 3.6) writes in trace mode for kernels on two GPUs: the
format pallas_prof.profiler.timing.insitu.parse_chrome_traces reads (one JSON document
per device, none naming its device). Run on a machine with two GPUs:

    OUT=/tmp python bench/probes/proton_trace_probe.py
"""
import os, sys, glob
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import jax, jax.numpy as jnp
sys.path.insert(0, "examples")
import multi_gpu
import triton.profiler as proton
out = os.environ.get("OUT", "/tmp")
name = os.path.join(out, "trace_probe")
x = jnp.ones((4096, 4096), jnp.float32)
g = jax.jit(multi_gpu.rms_norm)
xs = [jax.device_put(x, d) for d in jax.devices()]
for xd in xs:
  g(xd).block_until_ready()
s = proton.start(name, backend="cupti", context="shadow", data="trace")
for i, xd in enumerate(xs):
  for _ in range(i + 2):       # 2 launches on GPU 0, 3 on GPU 1
    g(xd).block_until_ready()
proton.finalize(s, "chrome_trace")
files = glob.glob(name + "*")
print("files", files)
for f in files:
  text = open(f).read()
  print(f, len(text))
  print(text[:3000])
