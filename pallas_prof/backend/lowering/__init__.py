"""Lowering: in, a pallas_call's jaxpr and its LoweringOptions; out, a GeneratedKernel (lower.py).
The walker (dispatch.py), rules/ by primitive, access/ for refs, features/ for what options add.

Never imports backend/compiling or backend/running (tests/test_structure.py checks it).
"""
