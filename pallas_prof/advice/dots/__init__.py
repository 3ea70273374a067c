"""A dot far from its matrix rate (issue 49): what advise builds for it.

  joint.py      block shapes, each with its own num_warps and num_stages (kind c)
  precision.py  the user's `precision=` changed (kind e): built, timed, and shown with the
                error each precision gives against a float64 reference
  layout.py     a TF32 dot's B given K-major (kind e): built, checked and timed, with the
                diff of the user's file layout_source.py writes

The diagnoses are rules of the table (rules/dots.py).
"""
