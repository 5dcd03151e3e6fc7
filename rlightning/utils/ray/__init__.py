"""The Ray layer: launching actors, the runtime lease, and the local/remote call layer.

Ray is imported lazily inside functions, so importing rlightning never needs a
running Ray runtime.
"""
