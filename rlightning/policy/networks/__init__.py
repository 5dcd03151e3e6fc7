"""Observation encoders chosen from the observation space: flat vectors or images.

    encoder = build_encoder(env_meta.observation_space, cnn="nature")   # an nn.Module with .dim
    features = encoder(torch.as_tensor(obs))                            # [B, encoder.dim] float32

Vector (and Discrete) spaces get the flat `ObsEncoder` (optionally normalised);
image spaces (a Box of rank 3, or rank 2 for a single channel) get a CNN that
takes the env's ``uint8`` frames as they are, scales them to [0, 1] inside the
network, and reads either channel order.
"""

from rlightning.policy.networks.cnn import CNN_TYPES, ImpalaCNN, NatureCNN, image_layout, is_image_space
from rlightning.policy.networks.encoders import build_encoder

__all__ = ["CNN_TYPES", "ImpalaCNN", "NatureCNN", "build_encoder", "image_layout", "is_image_space"]
