"""Observation encoders and action heads chosen from the spaces.

    encoder = build_encoder(env_meta.observation_space, cnn="nature")   # an nn.Module with .dim
    features = encoder(obs_to_tensor(obs))                              # [B, encoder.dim] float32
    head = ActionHead(env_meta.action_space, "ppo", kinds)              # its distribution
    actor = GSDEActor(encoder.dim, low, high, [64, 64], "relu", noise)  # gSDE exploration (SAC's use_sde)

Vector spaces (Box, Discrete, MultiDiscrete, MultiBinary) get the flat `ObsEncoder`
(a Box optionally normalised); image spaces (a Box of rank 3, or rank 2 for a
single channel) get a CNN that takes the env's ``uint8`` frames as they are,
scales them to [0, 1] inside the network, and reads either channel order; Dict
and Tuple spaces get a `DictEncoder`, one encoder per entry, concatenated.
"""

from rlightning.policy.networks.cnn import CNN_TYPES, ImpalaCNN, MinAtarCNN, NatureCNN, image_layout, is_image_space
from rlightning.policy.networks.encoders import DictEncoder, batch_len, build_encoder, nest_dotted_keys, obs_to_tensor
from rlightning.policy.networks.gsde import GSDEActor, StateDependentNoise
from rlightning.policy.networks.heads import ActionHead, GaussianActor, MultiCategorical

__all__ = [
    "CNN_TYPES",
    "ActionHead",
    "DictEncoder",
    "GSDEActor",
    "GaussianActor",
    "ImpalaCNN",
    "MinAtarCNN",
    "MultiCategorical",
    "NatureCNN",
    "StateDependentNoise",
    "batch_len",
    "build_encoder",
    "image_layout",
    "is_image_space",
    "nest_dotted_keys",
    "obs_to_tensor",
]
