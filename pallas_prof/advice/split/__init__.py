"""A structural edit advise builds itself: a reduction over a long loop done by one program
per output block, split across S programs with a second pass that adds the partials.

  pattern.py   recognize the pattern on the kernel's jaxpr (NotSplittable says why not)
  variant.py   build the variant from the recorded pallas_call, choose S, check it
  source.py    the variant as a unified diff against the user's file (never applied)
  source_file.py  the user's file as those diffs edit it (ast, offsets, the diff itself)
"""
