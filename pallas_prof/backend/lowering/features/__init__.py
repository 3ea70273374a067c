"""What the lowering emits beyond the plain code, each asked for by an option: in, the walk's
events (listeners.py); out, bounds checks, TMA descriptors, probes, a workaround plan's scan forms.
"""
