"""The differential fuzzer for as long as you like (testkit/fuzz holds the generator, tests/fuzz
runs a fixed set): its runner, summaries and merges, and the replay of its hazard leads on a GPU."""
