"""Property tests: random steps and truncations against a plain reference model of the pairing contract."""

from typing import List, Tuple

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlightning.buffer.utils import Storage, StorageFullError
from rlightning.types import EnvRet, PolicyResponse

Transition = Tuple[int, int, float, int, bool, bool]  # obs uid, action, reward, next uid, terminated, truncated


class Reference:
    """Contract 4 written the obvious way: one Python list per sub-environment."""

    def __init__(self, num_envs: int) -> None:
        self.ep: List[list] = [[] for _ in range(num_envs)]

    def step(self, uids, actions, reward, term, trunc) -> List[List[Transition]]:
        out = []
        for i, uid in enumerate(uids):
            if self.ep[i]:
                self.ep[i][-1].update(reward=reward[i], term=term[i], trunc=trunc[i])
            if term[i] or trunc[i]:
                if self.ep[i]:
                    out.append(self._close(self.ep[i], uid))
                self.ep[i] = []
            else:
                self.ep[i].append({"obs": uid, "action": actions[i]})
        return out

    def truncate(self) -> List[List[Transition]]:
        out = []
        for i, ep in enumerate(self.ep):
            if len(ep) >= 2:
                ep[-2]["trunc"] = True
                out.append(self._close(ep[:-1], ep[-1]["obs"]))
            self.ep[i] = []
        return out

    @staticmethod
    def _close(ep, final_uid) -> List[Transition]:
        nxt = [s["obs"] for s in ep[1:]] + [final_uid]
        return [(s["obs"], s["action"], s["reward"], n, s["term"], s["trunc"]) for s, n in zip(ep, nxt)]


class ManualVecEnv:
    """EnvRets with chosen done flags and NEXT_STEP autoreset; every observation has a unique id."""

    def __init__(self, num_envs: int) -> None:
        self.n = num_envs
        self.uid = 0
        self.reset_next = np.ones(num_envs, bool)

    def step(self, flags) -> Tuple[EnvRet, list, np.ndarray, np.ndarray, np.ndarray]:
        uids = list(range(self.uid, self.uid + self.n))
        self.uid += self.n
        reward = np.array([0.0 if self.reset_next[i] else 0.5 * uids[i] for i in range(self.n)], np.float32)
        term = np.array([f == 1 and not self.reset_next[i] for i, f in enumerate(flags)])
        trunc = np.array([f == 2 and not self.reset_next[i] for i, f in enumerate(flags)])
        self.reset_next = term | trunc
        obs = np.stack([np.arange(self.n), uids], 1).astype(np.float32)
        ret = EnvRet("M-0", obs, last_reward=reward, last_terminated=term, last_truncated=trunc)
        return ret, uids, reward, term, trunc


def stored(storage: Storage) -> List[Transition]:
    d = storage.get_data()
    if not len(d):
        return []
    cols = zip(
        d["obs"][:, 1].long().tolist(),
        d["action"].tolist(),
        d["reward"].tolist(),
        d["next_obs"][:, 1].long().tolist(),
        d["terminated"].tolist(),
        d["truncated"].tolist(),
    )
    return [tuple(c) for c in cols]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_steps_and_truncations(data):
    num_envs = data.draw(st.integers(1, 3), label="num_envs")
    capacity = data.draw(st.integers(1, 12), label="capacity")
    mode = data.draw(st.sampled_from(["circular", "standard"]), label="mode")
    unit = data.draw(st.sampled_from(["transition", "episode"]), label="unit")
    op = st.one_of(
        st.just("truncate"), st.lists(st.sampled_from([0, 0, 0, 1, 2]), min_size=num_envs, max_size=num_envs)
    )
    ops = data.draw(st.lists(op, max_size=40), label="ops")

    storage = Storage(capacity, mode, unit, [], "cpu", seed=0)
    env = ManualVecEnv(num_envs)
    ref = Reference(num_envs)
    episodes: List[List[Transition]] = []
    for item in ops:
        before = stored(storage)
        try:
            if item == "truncate":
                storage.truncate_episodes(["M-0"]) if storage.known_env_ids() else None
                new = ref.truncate() if storage.known_env_ids() else []
            else:
                env_ret, uids, reward, term, trunc = env.step(item)
                resp = PolicyResponse("M-0", action=np.array(uids, np.int64) * 3)
                storage.add_transition(env_ret, resp)
                new = ref.step(uids, [3 * u for u in uids], reward.tolist(), term.tolist(), trunc.tolist())
        except StorageFullError:
            assert mode == "standard"
            assert stored(storage) == before  # refused whole: nothing stored was lost or changed
            break
        episodes.extend(e for e in new if e)
        assert len(storage) <= capacity
        if unit == "transition":
            flat = [t for ep in episodes for t in ep]
            expected = flat if mode == "standard" else flat[max(0, len(flat) - capacity) :]
        else:
            kept = episodes if mode == "standard" else episodes[max(0, len(episodes) - capacity) :]
            expected = [t for ep in kept for t in ep]
        assert stored(storage) == expected
