"""Compiling: in, a GeneratedKernel; out, a CompiledKernel (compile.py: Triton's stages in a
worker process, for an explicit GPU target, cached by content), or a CompileError (failures/).
"""
