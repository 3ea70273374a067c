"""The `pallas-prof` command."""
