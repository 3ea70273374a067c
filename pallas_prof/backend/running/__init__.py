"""Running: in, a CompiledKernel (GPU: jaxlib's Triton custom call) or a GeneratedKernel (CPU:
Triton's interpreter); out, the kernel's outputs in the JAX program, or a KernelRuntimeError.
"""
