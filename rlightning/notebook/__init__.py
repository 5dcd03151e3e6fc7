"""The notebook API: a thin layer over the builders.

from rlightning.notebook import Lab
lab = Lab.local()
run = lab.build(load_preset("cartpole_ppo"))
"""

from rlightning.notebook.errors import JobsUnavailableError, ResourceError
from rlightning.notebook.lab import ClusterConnectionError, Lab
from rlightning.notebook.run import Run

__all__ = ["ClusterConnectionError", "JobsUnavailableError", "Lab", "ResourceError", "Run"]
