"""Probes on the GPU (issue #16): the probed variant of a small kernel replayed, its
buffer read back and checked against what the layout and the launch must give."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import pallas_prof

from ..conftest import load_example

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def softmax_probes():
  pallas_prof.install()
  m = load_example("softmax")
  pallas_prof.install()
  x = jax.random.normal(jax.random.PRNGKey(0), (777, 1000), jnp.float32)
  m.softmax(x).block_until_ready()
  report = pallas_prof.profile("softmax_kernel", probes=True, mode="cold", nvml=False,
                               ceilings=False, min_launches=20, min_seconds=0.05)
  kp = next(k for k in report.kernels if list(map(str, k.in_avals)) == ["float32[777,1000]"])
  assert kp.probes is not None, kp.errors
  return kp


def test_every_sampled_warp_of_every_program_wrote_its_row(softmax_probes):
  pr = softmax_probes.probes
  assert pr.programs == 777 and pr.program_stride == 1 and pr.ctas_total == 777
  assert pr.rows == 777 * pr.sampled_warps
  assert sorted(c.program for c in pr.ctas) == list(range(777))
  assert 1 < pr.sms <= 144


def test_the_figures_are_consistent(softmax_probes):
  pr = softmax_probes.probes
  assert sum(r.share for r in pr.regions) == pytest.approx(1.0)
  assert all(r.cycles_p10 <= r.cycles_median <= r.cycles_p90 for r in pr.regions)
  # the SM clock of an H200 runs at up to 1.98 GHz: 0.5 ns a cycle, more when slower
  assert 0.45 < pr.ns_per_cycle < 2.5
  for c in pr.ctas:
    assert c.start_ns <= c.boundaries_ns[0] and c.boundaries_ns == sorted(c.boundaries_ns)
  d = pr.distortion
  assert d.runtime_plain_s > 0 and d.runtime_probed_s > 0 and pr.distortion_pct == d.runtime_pct
  assert softmax_probes.runtime is not None      # the headline stays the plain kernel's


def test_the_alone_reading_ran_one_cta_per_sm(softmax_probes):
  """A 4-warp softmax runs many CTAs per SM; the alone launch asked for the shared memory
  of a whole SM, so its CTAs ran one per SM and each region has its own figures."""
  pr = softmax_probes.probes
  assert pr.alone is not None, pr.notes
  assert pr.alone.ctas_per_sm_beside > 1 and pr.alone.ctas_per_sm_alone == 1
  assert sum(r.alone_share for r in pr.regions) == pytest.approx(1.0)
  load = next(r for r in pr.regions if r.kind == "load")
  assert load.alone_cycles_median > 0 and load.beside_over_alone > 0
