"""What the lowering emits beyond the plain code, each a listener that keeps its own state:
in, the walk's events and the rules' questions (feature_hooks.py); out, bounds checks, TMA
descriptors, probes, a workaround plan's scan forms. Nothing here imports access/, and
rules/ and access/ import nothing here (tests/structure/test_lowering_features.py).
"""
