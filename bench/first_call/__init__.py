"""First call: what a process's first pallas_call and each op's first call wait for (fresh
processes, the compile worker, Triton's stages, jaxlib's payload), on a GPU or a CPU."""
