"""A failed or silently wrong compile: in, Triton's error, what it wrote to stderr and the stages
it finished; out, a CompileError naming the equations and whose fault, a reproducer, a workaround.
"""
