"""The differential fuzzer for as long as you like (tests/fuzz holds the generator and runs a
fixed set): its runner, summaries and merges, and the replay of its hazard leads on a GPU."""
