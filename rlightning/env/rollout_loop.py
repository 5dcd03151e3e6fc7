"""The rollout loop: every placement collects its steps through `run_rollout`.

A rollout is up to T steps of a set of env *streams*, answered by one *actor*, each
answered step written by a *sink*:

- in an env worker (``cluster.inference="env_workers"``, `RolloutWorker.collect`):
  one local stream, the worker's policy copy acting (`CopyActor`);
- in lock step over the local env workers of a group (`local_rollout.collect_local`): several
  local streams, worker 0's copy acting for all their rows with one forward pass;
- per step from the driver (``"eval_workers"``, `Collector.collect_steps`): the env
  group's workers as streams, local or Ray, the policy group acting; with two or
  more Ray workers *in flight*: each worker's next step is submitted as soon as its
  EnvRet is in, and the answered steps are written while the next ones run.

The three roles, as the loop calls them (``ids`` and ``rets`` are aligned lists)::

    streams.ids() / rows(id) / current(id)     # the streams, their rows N, the EnvRet each stands at
    streams.step(ids, outs) -> answered, restarted
        # lock step: step each with the actor's outputs and wait for all (nothing is left in flight when it
        # returns or raises); answered: (id, next EnvRet) pairs in the order given, the next EnvRet None when
        # that stream ended (its env raised in this process), current(id) is then its answer; restarted: ids
        # whose worker was recreated since (their next EnvRet is a reset)
    streams.submit(ids, outs)                  # in flight: start a step of each
    streams.wait(min_ready) -> answered, restarted   # in flight: at least min_ready of the steps submitted
    streams.drain()                            # in flight, after an error: let the steps in flight finish
    actor.act(ids, rets) -> outs               # one output per stream (its ``[N, ...]`` action and extras)
    actor.values(ids, rets) -> values          # the critic's values of those EnvRets (the bootstraps)
    sink.write(items, restarted)               # items: (id, t, out, next EnvRet) of one wait
    sink.wants_value(id) / sink.finish(values) # which records need a bootstrap; end the rollout with them

The bootstrap values are asked for in one place, at the end of the loop, of the actor
that acted. A stopped rollout (``stop`` set) submits no new step after the first; steps in
flight are awaited and written first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from rlightning.env.errors import caller_error

__all__ = ["CopyActor", "RolloutTimes", "can_step_together", "run_rollout"]


@dataclass
class RolloutTimes:
    """Seconds of one rollout: acting (and each stream's share of it, by rows), stepping, writing."""

    inference: float = 0.0
    env_step: float = 0.0
    write: float = 0.0
    inference_of: Dict[str, float] = field(default_factory=dict)
    steps_of: Dict[str, int] = field(default_factory=dict)

    def env_steps(self, rows: Dict[str, int]) -> int:
        """Env steps taken: each stream's steps times its rows."""
        return sum(t * rows[i] for i, t in self.steps_of.items())


def run_rollout(
    streams: Any,
    actor: Any,
    sink: Any,
    num_steps: int,
    *,
    in_flight: bool = False,
    stop: Any = None,
) -> RolloutTimes:
    """Step every stream of ``streams`` up to ``num_steps`` times with ``actor``'s outputs, writing into ``sink``.

    Args:
        streams, actor, sink: See the module docstring.
        num_steps: T, steps per stream (>= 1).
        in_flight: Submit each stream's next step as soon as its answer is in and write the answered steps
            while the next ones run (remote streams). False: lock step (act for all, step all, wait for all).
        stop: An object with ``is_set()`` (a `threading.Event`): once set, no new step is submitted.

    Returns:
        The rollout's `RolloutTimes` (the loop's own seconds and the steps each stream took).

    Raises:
        What the actor, the streams or the sink raise; steps in flight are awaited first.
    """
    order = list(streams.ids())
    rows = {i: int(streams.rows(i)) for i in order}
    times = RolloutTimes(inference_of=dict.fromkeys(order, 0.0), steps_of=dict.fromkeys(order, 0))
    shares = _Shares(rows, times.inference_of)
    run = _Run(order, streams, actor, sink, num_steps, stop, {}, times.steps_of, shares, [0.0, 0.0, 0.0])
    sent, clocks = run.sent, run.clocks
    ok = False
    try:
        (_in_flight if in_flight else _lock_step)(run)
        ok = True
    finally:
        if sent:  # an error while steps were in flight: let them finish so the streams can be used again
            try:
                streams.drain()
            except Exception:  # noqa: BLE001 - the first error is the one raised
                pass
        values: Dict[str, Any] = {}
        if ok:
            want = [i for i in order if sink.wants_value(i)]
            if want:
                t0 = time.perf_counter()
                got = actor.values(want, [streams.current(i) for i in want])
                spent = time.perf_counter() - t0
                clocks[0] += spent
                shares.add(want, spent)
                values = dict(zip(want, got))
        t0 = time.perf_counter()
        sink.finish(values)
        clocks[2] += time.perf_counter() - t0
        times.inference, times.env_step, times.write = clocks
    return times


@dataclass
class _Run:
    """What `run_rollout`'s two schedules (`_lock_step`, `_in_flight`) share: the roles, the bounds, and what they
    fill in (``sent``: in flight, the outputs each stream is stepping with, while it steps; ``steps``: each
    stream's steps; ``clocks``: inference, env step and write seconds)."""

    order: List[str]
    streams: Any
    actor: Any
    sink: Any
    num_steps: int
    stop: Any
    sent: Dict[str, Any]
    steps: Dict[str, int]
    shares: _Shares
    clocks: List[float]


class _Shares:
    """Each stream's share of the acting seconds, by rows."""

    def __init__(self, rows: Dict[str, int], inference_of: Dict[str, float]) -> None:
        self.rows, self.of = rows, inference_of
        total = sum(rows.values()) or 1
        self.everyone = len(rows)
        self.fraction = [(i, n / total) for i, n in rows.items()]  # each stream's share when all of them act

    def add(self, ids: Sequence[str], spent: float) -> None:
        of = self.of
        if len(ids) == self.everyone:  # every stream acted (lock step): the shares are known
            for i, part in self.fraction:
                of[i] += spent * part
            return
        rows = self.rows
        total = sum(rows[i] for i in ids) or 1
        for i in ids:
            of[i] += spent * rows[i] / total


def _lock_step(r: _Run) -> None:
    """Act for every stream, step them all, wait for all, write: ``num_steps`` times (a stream whose env raised
    drops out). Kept lean, as it runs every step of an env worker's own rollout: its clocks accumulate in locals
    and reach ``clocks`` at the end (every part timed from the end of the last one, ``now``); acting seconds
    while every stream acts are shared by rows once, at the end; ``steps`` is set when a stream drops out and at
    the end."""
    streams, steps, stop = r.streams, r.steps, r.stop
    clock = time.perf_counter
    act, step, write_items = r.actor.act, streams.step, r.sink.write
    active = list(r.order)
    rets = [streams.current(i) for i in active]  # after each wait: the answers (what `current` stands at then)
    all_act = True  # every stream acts (until one drops out)
    inference = env_step = write = acted_all = 0.0
    t = 0
    now = clock()
    try:
        for t in range(r.num_steps):
            if t and stop is not None and stop.is_set():  # a stop before the rollout still lets each take one step
                break
            outs = act(active, rets)
            t1 = clock()
            inference += t1 - now
            if all_act:
                acted_all += t1 - now
            else:
                r.shares.add(active, t1 - now)
            answered, restarted = step(active, outs)
            now = clock()
            env_step += now - t1
            # the answers come in the order given; None: the stream ended (its env raised), and
            # nothing more of it is written
            items = []
            rets = []
            for (i, nxt), out in zip(answered, outs):
                if nxt is not None:
                    items.append((i, t, out, nxt))
                    rets.append(nxt)
            if len(items) != len(active):  # a stream that ended drops out here
                kept = {item[0] for item in items}
                for i in active:
                    if i not in kept:
                        steps[i] = t
                active, all_act = [i for i in active if i in kept], False
            write_items(items, restarted)
            t1 = clock()
            write += t1 - now
            now = t1
            if not active:
                break
        else:
            t = r.num_steps
    finally:
        for i in active:
            steps[i] = t
        r.clocks[0] += inference
        r.clocks[1] += env_step
        r.clocks[2] += write
        r.shares.add(r.order, acted_all)


def _in_flight(r: _Run) -> None:
    """Submit each stream's next step as soon as its answer is in (acting for those answered at once) and write
    the answered steps while the next ones run."""
    streams, sent, steps, stop = r.streams, r.sent, r.steps, r.stop
    clock = time.perf_counter
    current = streams.current
    inference = env_step = write = 0.0
    now = clock()

    def submit(ids: List[str]) -> None:
        nonlocal now, inference, env_step
        outs = r.actor.act(ids, [current(i) for i in ids])
        t1 = clock()
        inference += t1 - now
        r.shares.add(ids, t1 - now)
        sent.update(zip(ids, outs))
        streams.submit(ids, outs)
        now = clock()
        env_step += now - t1

    try:
        submit(r.order)  # a stop asked for before the rollout still lets every stream take one step
        while sent:
            answered, restarted = streams.wait(1)
            t1 = clock()
            env_step += t1 - now
            now = t1
            items = []
            again = []
            for i, nxt in answered:
                out = sent.pop(i)
                if nxt is None:  # the stream ended (its env raised): nothing more of it is written
                    continue
                t = steps[i]
                items.append((i, t, out, nxt))
                steps[i] = t = t + 1
                if t < r.num_steps:
                    again.append(i)
            if again and (stop is None or not stop.is_set()):
                if len(again) > 1:  # worker order: a seeded run acts in the same order
                    keep = set(again)
                    again = [i for i in r.order if i in keep]
                submit(again)
            r.sink.write(items, restarted)
            t1 = clock()
            write += t1 - now
            now = t1
    finally:
        r.clocks[0] += inference
        r.clocks[1] += env_step
        r.clocks[2] += write


class CopyActor:
    """A policy copy in this process acting for the rows of one or more local streams.

    Acting straight through ``compute_actions`` (``fast``), the streams' observations are concatenated and
    answered with one forward pass; otherwise (a copy that answers EnvRets itself, or carries a recurrent
    state) each stream's EnvRet goes through ``rollout_batch``. ``defer``: act without the critic; the values
    of every observation are asked for once, when the rollout ends (``values_after_rollout``).
    """

    def __init__(self, policy: Any, rows: Dict[str, int], fast: bool, defer: bool = False) -> None:
        self.policy = policy
        self.rows = dict(rows)
        self.fast = bool(fast)
        self.defer = bool(defer) and self.fast
        self._count = getattr(policy, "count_rollout", None) if self.fast else None

    @property
    def weight_version(self) -> int:
        """The version of the weights that act."""
        return int(self.policy.weight_version)

    def count(self, rows: int) -> None:
        """Count ``rows`` answered (what ``rollout_batch`` would have counted: a copy's schedules run on them)."""
        if self._count is not None:
            self._count(rows)

    def act(self, ids: Sequence[str], rets: Sequence[Any]) -> List[Dict[str, Any]]:
        policy = self.policy
        try:
            if not self.fast:
                return [policy.rollout_batch([ret])[0].to_dict() for ret in rets]
            if len(rets) == 1:  # one stream (an env worker's own rollout): no concatenation, no split
                obs, sizes = rets[0].observation, None
            else:
                obs, sizes = _concatenated([ret.observation for ret in rets]), [self.rows[i] for i in ids]
            if self.defer:
                out = policy.compute_actions(obs, deterministic=policy.deterministic, with_value=False)
            else:
                out = policy.compute_actions(obs, deterministic=policy.deterministic)
            if self._count is not None:
                self._count(self.rows[ids[0]] if sizes is None else sum(sizes))
        except Exception as err:  # noqa: BLE001 - the policy's failure is the caller's: never a restart
            caller_error(err)
            raise
        return [out] if sizes is None else _split(out, sizes)

    def values(self, ids: Sequence[str], rets: Sequence[Any]) -> List[Any]:
        policy = self.policy
        try:
            if not self.fast:  # through the EnvRet: a recurrent policy acts from the state it stands at
                return [policy.rollout_batch([ret])[0].value for ret in rets]
            obs, sizes = _joined([ret.observation for ret in rets], [self.rows[i] for i in ids])
            value = policy.compute_actions(obs, deterministic=True)["value"]
            self.count(sum(sizes))
        except Exception as err:  # noqa: BLE001 - the policy's failure is the caller's: never a restart
            caller_error(err)
            raise
        return [part["value"] for part in _split({"value": value}, sizes)]


def _joined(observations: Sequence[Any], sizes: List[int]) -> Tuple[Any, List[int]]:
    if len(observations) == 1:
        return observations[0], sizes
    return _concatenated(observations), sizes


def _concatenated(observations: Sequence[Any]) -> Any:
    """The streams' observation batches as one: arrays along their rows, Dict observations (nested dicts of
    arrays, as `can_step_together` admits them) key by key."""
    first = observations[0]
    if type(first) is np.ndarray:
        return np.concatenate(observations, axis=0)
    return {k: _concatenated([obs[k] for obs in observations]) for k in first}


def _layout(obs: Any, rows: int) -> Any:
    """What must match for observations to share a forward pass: each array's shape past its ``rows`` and its
    dtype, key by key for a Dict observation; None when ``obs`` is neither an array of ``rows`` rows nor a dict of
    them."""
    if type(obs) is np.ndarray:
        return (obs.shape[1:], obs.dtype) if obs.ndim >= 1 and obs.shape[0] == rows else None
    if type(obs) is not dict or not obs:
        return None
    parts = tuple((k, _layout(v, rows)) for k, v in obs.items())
    return None if any(part is None for _, part in parts) else parts


def _split(out: Dict[str, Any], sizes: List[int]) -> List[Dict[str, Any]]:
    if len(sizes) == 1:
        return [out]
    parts, start = [], 0
    for n in sizes:
        rows = slice(start, start + n)
        parts.append({k: v[rows] for k, v in out.items()})
        start += n
    return parts


def can_step_together(workers: Sequence[Any]) -> bool:
    """True when local ``workers`` can share one forward pass per step: every copy acts straight through
    ``compute_actions`` with the same synced weights and mode, on observations of one layout (arrays of one
    shape and dtype past the rows, or Dict observations of such arrays with the same keys)."""
    if len(workers) < 2 or not all(w.acts_on_observations and w.weights_synced for w in workers):
        return False  # copies that were never synced hold their own initial weights
    versions = {int(w.policy.weight_version) for w in workers}
    if len(versions) != 1 or len({bool(w.policy.deterministic) for w in workers}) != 1:
        return False
    layouts = set()
    for w in workers:
        layout = _layout(getattr(w.current_env_ret, "observation", None), w.num_envs)
        if layout is None:
            return False
        layouts.add(layout)
    return len(layouts) == 1
