"""Runs of several processes: jax.distributed on localhost, two `pallas-prof run`s, one report."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import jax
import pytest

from pallas_prof.cli import processes
from tests.cli.test_cli import ROOT, pallas_prof

SCRIPT = os.path.join(ROOT, "tools", "distributed_two_processes.py")


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def test_install_leaves_jax_uninitialized_for_jax_distributed():
  code = ("import pallas_prof; pallas_prof.install()\n"
          "from pallas_prof.backend import compat\n"
          "assert not compat.backends_initialized(), 'install() created a JAX backend'\n"
          "import jax; jax.devices(); assert compat.backends_initialized()\n")
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=300)
  assert result.returncode == 0, result.stderr


def test_processes_started_in_the_same_second_get_their_own_directories(tmp_path):
  taken = processes.fresh_dir(str(tmp_path / "out" / "20261201-214500"))
  again = processes.fresh_dir(str(tmp_path / "out" / "20261201-214500"))
  assert taken != again and os.path.isdir(taken) and os.path.isdir(again)
  assert again == f"{taken}-{os.getpid()}"


def test_a_parent_of_runs_needs_runs_inside(tmp_path):
  with pytest.raises(SystemExit, match="no report.json"):
    processes.find_runs([str(tmp_path)])


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
  """A jax.distributed program of two processes on this machine, each run through
  `pallas-prof run --out runs/p<i>`, at the same time."""
  runs = tmp_path_factory.mktemp("distributed") / "runs"
  address = f"localhost:{_free_port()}"
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  procs = [subprocess.Popen([sys.executable, "-m", "pallas_prof", "run", "--out",
                             str(runs / f"p{i}"), SCRIPT, address, str(i)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=ROOT)
           for i in (0, 1)]
  outputs = [p.communicate(timeout=600)[0] for p in procs]
  for i, (p, out) in enumerate(zip(procs, outputs)):
    assert p.returncode == 0, out
    assert f"process {i} of 2" in out
  return runs


@pytest.mark.slow
def test_each_process_says_where_it_ran(two_processes):
  for i in (0, 1):
    report = json.loads((two_processes / f"p{i}" / "report.json").read_text())
    origin = report["origin"]
    assert origin["jax.process_index"] == i and origin["jax.process_count"] == 2
    assert origin["host.name"] == socket.gethostname() and origin["process.pid"] > 0
    assert len(origin["devices"]) == 1 and \
        origin["devices"][0].startswith(f"{jax.default_backend()}:")   # cpu:0, or gpu:0
    with open(two_processes / f"p{i}" / "trace.otlp.jsonl") as f:
      batches = [json.loads(line) for line in f]
    resources, stamped = [], set()
    for batch in batches:
      for rs in batch["resourceSpans"]:
        resources.append({a["key"]: a["value"] for a in rs["resource"]["attributes"]})
        for ss in rs["scopeSpans"]:
          for span in ss["spans"]:
            attrs = {a["key"]: a["value"] for a in span.get("attributes", [])}
            if span["name"].startswith("lower "):
              stamped.add(attrs["jax.process_index"]["intValue"])
    assert resources and all(r["host.name"]["stringValue"] == origin["host.name"]
                             and int(r["process.pid"]["intValue"]) == origin["process.pid"]
                             for r in resources)
    assert stamped == {str(i)}                      # every lowering span knows its process


@pytest.mark.slow
def test_report_merges_the_processes(two_processes, tmp_path):
  result = pallas_prof("report", str(two_processes))
  assert result.returncode == 0, result.stderr
  rows = [line for line in result.stdout.splitlines() if "scale_kernel#" in line]
  assert len(rows) == 2, result.stdout
  assert rows[0].split()[0] == "0/2" and rows[1].split()[0] == "1/2"
  assert "kernels of 2 processes" in result.stdout

  page = tmp_path / "merged.html"
  result = pallas_prof("report", str(two_processes / "p1"), str(two_processes / "p0"), "--html",
                       "--html-out", str(page))
  assert result.returncode == 0 and result.stdout.strip() == str(page), result.stderr
  text = page.read_text()
  assert text.count('<section class="kernel panel"') == 2
  assert text.index("process 0/2") < text.index("process 1/2")   # ordered by process index
  assert "processes merged into this report" in text

  one = pallas_prof("report", str(two_processes / "p0"))
  assert one.returncode == 0 and "kernels of 2 processes" not in one.stdout
