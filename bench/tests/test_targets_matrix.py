"""bench/targets/matrix.py: fuzz kernels compiled for sm_80 and gfx942 on the CPU, the
table and record it writes (issue 40, item 5)."""
from __future__ import annotations

import gzip
import json
import os

import pytest

from bench.targets import matrix
from pallas_prof.backend.targets import parse_target


def test_a_small_matrix_writes_its_table_and_record(tmp_path, capsys):
  assert matrix.main(["--no-examples", "--no-jax-ops", "--fuzz", "3", "--seed", "7", "--targets", "sm_80,hip:gfx942",
                      "--out", str(tmp_path)]) == 0
  (md,) = [f for f in os.listdir(tmp_path) if f.endswith(".md")]
  text = (tmp_path / md).read_text()
  with gzip.open(tmp_path / md.replace(".md", ".json.gz"), "rt") as f:
    record = json.load(f)
  assert record["targets"] == ["sm_80", "gfx942"] and record["command"].endswith("--out " + str(tmp_path))
  rows = record["rows"]
  kernels = {r["kernel"] for r in rows}
  assert kernels and len(rows) == 2 * len(kernels)        # each kernel once per target
  assert all(r["status"] in ("compiled", "refused", "failed") for r in rows)
  amd = [r for r in rows if r["target"] == "gfx942" and r["status"] == "compiled"]
  assert amd and all(r["warp_size"] == 64 and r["spill_unit"] == "registers" and r["vgprs"] > 0
                     for r in amd)
  nv = [r for r in rows if r["target"] == "sm_80" and r["status"] == "compiled"]
  assert nv and all(r["registers"] > 0 and r["spill_unit"] == "bytes" for r in nv)
  assert "| sm_80 | 32 |" in text and "| gfx942 | 64 |" in text and "python3 bench/targets/matrix.py" in text
  assert f"{len(kernels)} fuzz kernels (from 3 programs drawn" in text
  assert capsys.readouterr().out.count("## Target matrix") == 1


def test_the_table_counts_refusals_and_names_each_reason_once():
  targets = [parse_target("sm_80"), parse_target("gfx942")]
  base = {"group": "example", "seconds": 0.1, "shared_bytes": 0, "reason": ""}
  rows = [dict(base, kernel="a", target="sm_80", status="compiled", registers=40, spills=8),
          dict(base, kernel="a", target="gfx942", status="compiled", registers=20, spills=2),
          dict(base, kernel="b", target="sm_80", status="refused", reason="sm_80 has no float8_e4m3fn"),
          dict(base, kernel="b", target="gfx942", status="failed", reason="Triton 3.6.0: boom"),
          dict(base, kernel="c", target="sm_80", status="refused", reason="sm_80 has no float8_e4m3fn"),
          dict(base, kernel="c", target="gfx942", status="compiled", registers=9, spills=0)]
  text = matrix.markdown(rows, targets, "cmd", "abc1234", "3.6.0", 1.0, 0, 0)
  assert "| sm_80 | 32 | 1 | 2 | 0 | 40 / 40 | 1 (8B) | 0 KiB |" in text
  assert "| gfx942 | 64 | 2 | 0 | 1 | 20 / 20 | 1 (2 regs) | 0 KiB |" in text
  assert "- refused: sm_80 has no float8_e4m3fn (2x: b on sm_80; c on sm_80)" in text
  assert "- failed: Triton 3.6.0: boom (1x: b on gfx942)" in text
  assert "| a | 40 regs, 0 KiB, spills 8 | 20 regs, 0 KiB, spills 2 |" in text


def test_groups_compiles_only_those_and_names_the_record_by_them(tmp_path, capsys):
  assert matrix.main(["--groups", "fuzz", "--fuzz", "2", "--seed", "7", "--targets", "sm_80",
                      "--out", str(tmp_path)]) == 0
  (md,) = [f for f in os.listdir(tmp_path) if f.endswith(".md")]
  assert md.endswith("_fuzz.md"), md
  with gzip.open(tmp_path / md.replace(".md", ".json.gz"), "rt") as f:
    record = json.load(f)
  assert record["rows"] and {r["group"] for r in record["rows"]} == {"fuzz"}
  text = (tmp_path / md).read_text()
  # no tables of the groups left out (no example, feature or JAX ops lowered)
  assert "Examples (" not in text and "Feature kernels" not in text, text
  assert "JAX's own Pallas GPU ops (" not in text and "0 example kernels" in text, text


def test_groups_names_a_bad_group_and_what_conformance_needs(capsys):
  for argv, said in ((["--groups", "jax_ops,examples"], "examples is not a group"),
                     (["--groups", "conformance"], "give --saved"),
                     (["--groups", "fuzz", "--saved", "/nowhere"], "add conformance")):
    with pytest.raises(SystemExit) as info:
      matrix.main(argv)
    assert info.value.code == 2
    assert said in capsys.readouterr().err, argv
