"""The pixel PPO item's shared settings: every side trains the same PPO on the same frames and CNN.

Env: `benchmarks.pixel_env.SyntheticPixels` (84x84x4 uint8 frames, six actions,
almost no simulation cost), 8 sub-envs x 128 steps = 1024 env steps per
iteration; PPO as CleanRL's ppo_atari.py: 4 epochs of 4 minibatches (256),
Adam lr 2.5e-4, gamma 0.99, GAE lambda 0.95, clip 0.1, entropy 0.01, value
0.5, gradient norm 0.5. Network: the Nature DQN CNN (32 8x8/4, 64 4x4/2, 64
3x3/1, ReLU) and a 512-unit layer shared by the policy and value heads.

A repeat is one timed window of whole iterations (sampling, then learning)
after one warm-up iteration: env steps collected and trained on per second.
Only the standard library is imported here (every venv reads it).
"""

from __future__ import annotations

NUM_ENVS = 8
ROLLOUT = 128
EPOCHS = 4
MINIBATCHES = 4
LR = 2.5e-4
GAMMA = 0.99
GAE_LAMBDA = 0.95
CLIP = 0.1
ENT = 0.01
VF = 0.5
MAX_GRAD_NORM = 0.5
BATCH = NUM_ENVS * ROLLOUT
MINIBATCH = BATCH // MINIBATCHES
CASE = "8 envs x 128 steps"
