"""RLlib APPO (new API stack) learner throughput on CartPole-v1, config matched to ``cartpole_appo``.

Matched: 2 EnvRunners x 8 CartPole-v1 sub-envs, 32 steps per env per fragment (a 512-step train batch),
each batch passed over 4 times in minibatches of 128, lr 1e-3, gamma 0.99, V-trace with rho-bar = c-bar
= 1, clip 0.2, no entropy bonus, value loss weight 0.5, grad norm clip 0.5, no KL loss, separate 64x64
tanh policy and value MLPs, one learner in the driver. Not matchable: RLlib's APPO keeps a circular
buffer of batches and a target network updated on its own schedule (rlightning's ratio is against the
policy at the start of each update); each side has its own weight initialisation.

Env steps the learner trained on per second, over ``--seconds`` of ``train()`` calls after two warm-up
iterations; one value per repeat.
"""

from __future__ import annotations

import time

import _common as c

c.set_threads()

import rllib_common as rc  # noqa: E402


def appo_config(num_env_runners: int = 2, num_envs: int = 8, fragment: int = 32):
    from ray.rllib.algorithms.appo import APPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    batch = num_env_runners * num_envs * fragment
    return (
        APPOConfig()
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
            model_config=DefaultModelConfig(fcnet_hiddens=[64, 64], fcnet_activation="tanh", vf_share_layers=False)
        )
        .training(
            train_batch_size_per_learner=batch,
            minibatch_size=batch // 4,
            circular_buffer_iterations_per_batch=4,
            lr=1e-3,
            gamma=0.99,
            vtrace=True,
            vtrace_clip_rho_threshold=1.0,
            vtrace_clip_pg_rho_threshold=1.0,
            clip_param=0.2,
            entropy_coeff=0.0,
            vf_loss_coeff=0.5,
            grad_clip=0.5,
            grad_clip_by="global_norm",
            use_kl_loss=False,
        )
        .reporting(metrics_num_episodes_for_smoothing=20)
    )


def _trained(res) -> int:
    """Lifetime env steps the learner trained on; where this RLlib version does not report them (its async
    learner updates return none, ray-project/ray#44668), the env steps sampled."""
    paths = (
        ("learners", "__all_modules__", "num_env_steps_trained_lifetime"),
        ("num_env_steps_trained_lifetime",),
        ("env_runners", "num_env_steps_sampled_lifetime"),
        ("num_env_steps_sampled_lifetime",),
    )
    for path in paths:
        node = res
        for key in path:
            node = node.get(key, {}) if isinstance(node, dict) else {}
        if isinstance(node, (int, float)) and node:
            return int(node)
    return 0


def main() -> None:
    a = c.args()
    rc.start_ray()
    algo = appo_config().debugging(seed=a.seed).build_algo()
    res = algo.train()
    res = algo.train()  # warm-up
    seconds = a.seconds if a.seconds > 2.0 else 20.0
    c.begin("learner throughput")
    rates = []
    for _ in range(a.repeats):
        steps0, t0 = _trained(res), time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            res = algo.train()
        rates.append((_trained(res) - steps0) / (time.perf_counter() - t0))
    ret = float(res.get("env_runners", {}).get("episode_return_mean", float("nan")) or 0.0)
    c.result("learner throughput", rates, "env steps/s", env_steps=_trained(res), final_return=ret)
    algo.stop()


if __name__ == "__main__":
    main()
