"""rlightning.widgets: ipywidgets views over the core's plain snapshots.

This folder sits at the repository top level and is installed as
``rlightning.widgets``. Views never hold logic the core lacks.
"""
