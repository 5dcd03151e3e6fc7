"""Property-based tests of bad input: configs, payloads, CLI arguments."""
