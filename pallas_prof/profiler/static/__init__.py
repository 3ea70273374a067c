"""In: a CompiledKernel and its GeneratedKernel; no GPU needed.
Out: each instruction's equation and user line (correlate: StaticProfile); cost: WorkModel.

Imports no other room of the profiler; timing/, sampling/ and probes/ may import it.
"""
