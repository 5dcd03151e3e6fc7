"""RLlib (new API stack) PPO config matched to rlightning's ``cartpole_ppo`` preset.

Matched: 2 EnvRunners x 8 CartPole-v1 sub-envs, 128 steps per env per
iteration (a 2048-step train batch), 4 epochs of 4 minibatches (512), lr 1e-3
annealed linearly to 0, gamma 0.99, GAE lambda 0.95, clip 0.2, no entropy
bonus, value loss weight 0.5, grad norm clip 0.5, no KL penalty, separate
policy and value MLPs 64x64 tanh (``vf_share_layers=False``: RLlib's default
shares the trunk), one learner in the driver. Not matchable:
RLlib clips the value *loss* at ``vf_clip_param`` (rlightning clips the value
prediction at ``clip_coef``; set to RLlib's default 10), and each side has its
own weight initialisation.
"""

from __future__ import annotations

import os

NUM_CPUS = 4  # the same logical CPU count both sides give their Ray runtime


def start_ray():
    import ray

    os.environ.pop("RAY_ADDRESS", None)
    os.environ.setdefault("RAY_agent_register_timeout_ms", "120000")
    ray.init(address="local", num_cpus=NUM_CPUS, include_dashboard=False, log_to_driver=False)
    return ray


def ppo_config(num_env_runners: int = 2, num_envs: int = 8, fragment: int = 128, total_steps: int = 150 * 2048):
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    batch = max(num_env_runners, 1) * num_envs * fragment
    return (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(
            num_env_runners=num_env_runners,
            num_envs_per_env_runner=num_envs,
            rollout_fragment_length=fragment,
            gym_env_vectorize_mode="vector_entry_point",
            num_cpus_per_env_runner=1,
        )
        .learners(num_learners=0)
        .rl_module(
            # vf_share_layers: RLlib's default (True) puts the value head on the policy's trunk; rlightning's
            # PPO has separate actor and critic MLPs.
            model_config=DefaultModelConfig(fcnet_hiddens=[64, 64], fcnet_activation="tanh", vf_share_layers=False)
        )
        .training(
            train_batch_size_per_learner=batch,
            minibatch_size=batch // 4,
            num_epochs=4,
            lr=[[0, 1e-3], [total_steps, 0.0]],
            gamma=0.99,
            lambda_=0.95,
            clip_param=0.2,
            entropy_coeff=0.0,
            vf_loss_coeff=0.5,
            grad_clip=0.5,
            grad_clip_by="global_norm",
            use_kl_loss=False,
            kl_coeff=0.0,
            vf_clip_param=10.0,
        )
        .reporting(metrics_num_episodes_for_smoothing=20)
    )
