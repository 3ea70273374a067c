"""Registers, spills and SASS loops (sm_90, triton wheel, on a CPU) of five suite kernels under
the pallas_prof on PYTHONPATH: how rules/addressing.pointer's form was chosen (compare two
checkouts; the forms it was compared with: bench/results/archive/address_forms_69690a1.patch.gz).

    PYTHONPATH=. python3 bench/probes/address_forms.py \\
        mha_fwd_bf16,mha_bwd_bf16,mha_bwd_f32,matmul_bf16,ln_bwd_bf16 [keep_dir]
"""
import sys, os, json, re, subprocess, tempfile, collections
sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import jax, jax.numpy as jnp
import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling.compile import compile_kernel, assemble_cubin
from bench.suite import suite_cases as sc
import triton

CASES = {
 "mha_fwd_bf16": ("mha fwd causal", (4,4096,16,64), "bfloat16"),
 "mha_bwd_bf16": ("mha fwd+bwd causal", (4,4096,16,64), "bfloat16"),
 "mha_bwd_f32": ("mha fwd+bwd causal", (2,5120,8,128), "float32"),
 "matmul_bf16": ("matmul", (8192,8192,8192), "bfloat16"),
 "ln_bwd_bf16": ("layer_norm fwd+bwd", (1,8192,8192), "bfloat16"),
}
BIN = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")

def find(op, shape, dtype):
  for c in sc.CASES:
    if c.op == op and tuple(c.shape) == shape and jnp.dtype(c.dtype).name == dtype:
      return c
  raise KeyError(op)

def sass(cubin):
  with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
    f.write(cubin)
  out = subprocess.run([os.path.join(BIN, "cuobjdump"), "-sass", f.name], capture_output=True, text=True).stdout
  os.unlink(f.name)
  ins = []
  for line in out.splitlines():
    m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
    if m:
      ins.append((int(m.group(1), 16), m.group(2)))
  return ins, out

def loops(ins):
  addr_index = {a: k for k, (a, _) in enumerate(ins)}
  res = []
  for k, (a, text) in enumerate(ins):
    m = re.search(r"\bBRA\b.*?(0x[0-9a-f]+)", text)
    if m:
      t = int(m.group(1), 16)
      if t < a and t in addr_index:
        s = addr_index[t]; body = [x for _, x in ins[s:k+1]]
        ops = collections.Counter(x.split()[1 if x.startswith("@") else 0].split(".")[0] for x in body)
        def where(pred):
          return [round(j / len(body), 2) for j, x in enumerate(body) if pred(x)]
        res.append({"start": hex(t), "n": len(body),
                    "LDG": ops["LDG"], "LDGSTS": ops["LDGSTS"], "UTMALDG": ops["UTMALDG"],
                    "LDS": ops["LDS"] + ops["LDSM"], "STL": ops["STL"], "LDL": ops["LDL"],
                    "HGMMA": ops["HGMMA"], "HMMA": ops["HMMA"], "IMAD": ops["IMAD"], "IADD3": ops["IADD3"],
                    "LEA": ops["LEA"],
                    "gload_pos": where(lambda x: re.search(r"\b(LDG|LDGSTS)\b", x))})
  return res

def main(name, keep=None):
  op, shape, dtype = CASES[name]
  c = find(op, shape, dtype)
  built = c.make(jax.random.PRNGKey(0))
  args = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in built.args]
  pallas_prof.install()
  kernel_registry.clear(); jax.clear_caches()
  jax.jit(built.pallas).lower(*args)
  out = []
  for rec in kernel_registry.kernels():
    gk = rec.generated
    ck = assemble_cubin(compile_kernel(gk, ("cuda", 90), use_disk_cache=False))
    ins, text = sass(ck.asm["cubin"])
    if keep:
      os.makedirs(keep, exist_ok=True)
      base = os.path.join(keep, f"{name}.{gk.name}")
      open(base + ".py", "w").write(gk.source if hasattr(gk, "source") else open(gk.path).read())
      open(base + ".sass", "w").write(text)
      open(base + ".ptxas", "w").write(ck.ptxas_log or "")
    r = ck.resources() if hasattr(ck, "resources") else {}
    out.append({"kernel": gk.name, "resources": r, "sass_n": len(ins), "loops": loops(ins)})
  return out

if __name__ == "__main__":
  names = sys.argv[1].split(",")
  keep = sys.argv[2] if len(sys.argv) > 2 else None
  print("pallas_prof from", pallas_prof.__file__, file=sys.stderr)
  res = {n: main(n, keep) for n in names}
  print(json.dumps(res))
