"""A kernel ref's access: in, a RefValue (refs.py) and the indexers applied to it; out, its
view (views.py), and the offsets, mask and tl.load/tl.store expression of a read or write (addressing.py).
"""
