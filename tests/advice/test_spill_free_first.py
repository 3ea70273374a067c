"""Where the original kernel spills, the trials time first the variants whose compile spills
nothing. The H200 at 095f1e6: the spills known answer compiled four variants, timed the
two num_warps ones (both still spilling) and ran out of its share before the (2, 8192)
block, the variant without spills that saves 73 %."""
from types import SimpleNamespace

from pallas_prof.advice.trials import _spill_free_first


def _ck(spills):
  return SimpleNamespace(cubin_deferred=False, spills=spills)


def test_spill_free_variants_go_first_in_their_ranked_order():
  rec = SimpleNamespace(compiled=_ck(22780))
  ready = [("warps 8", _ck(9000)), ("warps 2", _ck(40000)), ("block 2", _ck(0)),
           ("block 8", _ck(0))]
  assert [k for k, _ in _spill_free_first(rec, ready)] == ["block 2", "block 8", "warps 8",
                                                             "warps 2"]


def test_a_kernel_that_does_not_spill_keeps_the_ranking():
  ready = [("warps 8", _ck(9000)), ("block 2", _ck(0))]
  for spills in (0, None):
    assert _spill_free_first(SimpleNamespace(compiled=_ck(spills)), ready) == ready
