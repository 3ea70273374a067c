"""In: a kernel's probed variant (backend/probes.py), replayed through timing/.
Out: a ProbeResult (probe_schema.py): cycles per region, CTAs on SMs, distortion, reconciliation.

Imports static/ and timing/, never sampling/ (the reconciliation reads the Attribution handed it).
"""
