"""Shared utilities: configs, registries, logging, flags and the Ray layer."""
