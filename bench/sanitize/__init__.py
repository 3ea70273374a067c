"""compute-sanitizer over the examples, JAX's GPU ops, fuzz programs and ejected kernels, and
issue 18's one-call reliability proof that runs it beside the GPU tests and the fuzzer."""
