"""Measurement spread over every runner the cluster has: one `Measurer` actor per node (or slot).

A tuning run measures ~10^4 candidates; one runner actor caps it at one machine's speed. The pool
places one runner on each node that has the target's resource (CPU cores, a GPU), sends each free
runner the next chunk of candidates as soon as it finishes one (`ray.wait` over the work in
flight), and hands the results back in candidate order, so the driver stays the records file's
single, ordered writer.

A runner that dies (its node lost, its process killed) costs nothing: its pending candidates go
back to the queue and are measured by the others, a replacement is started where there is room,
and every candidate comes back exactly once. A candidate that kills runners again and again is
failed after `max_attempts`, and one that runs past its time limit is failed (its runner is
replaced), as `MeasureRunner` does: failures are values.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hiertune.errors import HiertuneError, ResourceUnavailableError
from hiertune.platform.placement import required_resource, start_actor
from hiertune.platform.runners import MeasureInput, Measurer, MeasureResult, RunnerConfig

log = logging.getLogger(__name__)


class PoolMeasurer(Measurer):
    """A `Measurer` that also says which Ray node it runs on (placement checks, per-node stats)."""

    def ready(self) -> dict[str, Any]:
        import ray

        return {**super().ready(), "node_id": ray.get_runtime_context().get_node_id()}

    def measure_refs(self, *inputs: MeasureInput) -> list[MeasureResult]:
        """A chunk of candidates, passed as top-level object refs so Ray resolves them here."""
        return self.measure(list(inputs))


@dataclass
class PoolStats:
    """What the pool did, for tests and the scaling benchmark."""

    dispatched: int = 0  # remote calls sent (re-queued candidates count again)
    requeued: int = 0  # candidates sent again after their runner died
    replaced: int = 0  # runners started to replace dead ones
    lost_runners: int = 0  # runners found dead
    remeasured_elsewhere: int = 0  # candidates of a dead runner measured on another node
    per_node: dict[str, int] = field(default_factory=collections.Counter)  # results per node id


@dataclass
class _Call:
    indices: list[int]  # candidates of this remote call, ascending
    runner: _Runner
    started: float


@dataclass
class _Runner:
    actor: Any
    node_id: str
    in_flight: int = 0


def runner_nodes(device: str, amount: float = 1.0) -> dict[str, int]:
    """Live node id -> runner slots (how many runners of `amount` its resource holds), for a device."""
    import ray

    resource = required_resource(device)
    slots = {}
    for node in ray.nodes():
        total = node.get("Resources", {}).get(resource, 0.0)
        if node.get("Alive") and total >= amount:
            slots[node["NodeID"]] = int(total // amount)
    return slots


def spread_actor(actor_class: type, device: str, node_id: str | None, *args: Any, num_cpus: float = 1.0,
                 env: dict[str, str] | None = None, timeout_s: float = 60.0, what: str = "actor") -> Any:
    """Start `actor_class` (a plain class with `ready()`) on `node_id` (None: anywhere it fits).

    Pinning each runner to a chosen node is what spreads them; placement still fails fast.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    options: dict[str, Any] = {"max_restarts": 0}
    if node_id is not None:
        options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
    return start_actor(ray.remote(**options)(actor_class), device, *args, num_cpus=num_cpus, env=env,
                       timeout_s=timeout_s, what=what)


class RunnerPool:
    """The driver's handle on many runner actors; same `measure`/`close` as `MeasureRunner`.

    num_runners: None = one per node that has the device's resource; N = N runners spread over
    those nodes round-robin (several per node when its resource holds several).
    depth: calls in flight per runner (2 hides the driver's round trip between calls).
    chunk: candidates per remote call; None = the batch split evenly over the runners (each call
    pays the builder's fresh worker processes, 1.5-6 s here, so fewer, larger calls win when
    runners are alike; a small fixed chunk balances unlike nodes better).
    on_result: called after each finished candidate with (done, total) - progress bars, tests.
    """

    def __init__(self, config: RunnerConfig, num_runners: int | None = None, depth: int = 1,
                 chunk: int | None = None, max_attempts: int = 3,
                 on_result: Callable[[int, int], None] | None = None) -> None:
        import ray

        if config.device not in ("cpu", "gpu"):
            raise HiertuneError(
                f"runner device {config.device!r} cannot time TVM candidates; use cpu or gpu "
                "(Edge TPU stages run through `hiertune pipeline`)"
            )
        if num_runners is not None and num_runners < 1:
            raise HiertuneError(
                f"--runners must be >= 1 (got {num_runners}); omit it (or --runners 0 on the command line) "
                "for one runner per node"
            )
        if depth < 1 or max_attempts < 1 or (chunk is not None and chunk < 1):
            raise HiertuneError(
                f"RunnerPool depth, chunk and max_attempts must be >= 1 (got {depth}, {chunk}, {max_attempts})"
            )
        if not ray.is_initialized():
            raise HiertuneError("RunnerPool needs Ray: call init_ray() first (or use --no-ray for one local runner)")
        self.config = config
        self.depth = depth
        self.chunk = chunk
        self.max_attempts = max_attempts
        self.on_result = on_result
        self.stats = PoolStats()
        self.last_nodes: list[str | None] = []  # node id that measured each candidate of the last batch
        self._cpus = config.num_cpus if config.device == "cpu" else 1.0
        self._env = {"TVM_NUM_THREADS": str(max(1, int(config.num_cpus)))}
        self._runners: list[_Runner] = []
        self._lock = threading.Lock()
        slots = runner_nodes(config.device, self._cpus)
        if not slots:
            # no node has it: the same clear error a single runner gives
            from hiertune.platform.ray_runtime import require_resource

            require_resource(required_resource(config.device), self._cpus, what=f"{config.device} runner pool")
        wanted = len(slots) if num_runners is None else num_runners
        capacity = sum(slots.values())
        if wanted > capacity:
            raise ResourceUnavailableError(
                f"--runners {wanted} needs {wanted} x {self._cpus:g} {required_resource(config.device)} but the "
                f"cluster's nodes hold {capacity} such runner(s); lower --runners or --runner-cores, or add nodes"
            )
        order = _round_robin(slots, wanted)
        # start them all at once: each pays the TVM import (seconds), in parallel across nodes
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(len(order), 16)) as threads:
            futures = [threads.submit(self._start, node_id) for node_id in order]
            errors = [f.exception() for f in futures]
        if any(errors):
            self.close()
            raise next(e for e in errors if e is not None)

    # ------------------------------------------------------------------ runners
    def _start(self, node_id: str | None, timeout_s: float | None = None) -> _Runner:
        import ray

        actor = spread_actor(
            PoolMeasurer, self.config.device, node_id, self.config, num_cpus=self._cpus, env=self._env,
            # a runner imports TVM as it starts: on a busy host that alone can take a minute
            timeout_s=2 * self.config.placement_timeout_s if timeout_s is None else timeout_s,
            what=f"{self.config.device} measurement runner",
        )
        info = ray.get(actor.ready.remote())
        runner = _Runner(actor, info["node_id"])
        with self._lock:
            self._runners.append(runner)
        return runner

    def _replace(self, dead: _Runner) -> None:
        """Drop a dead runner; start another where a node has a free slot (else the pool shrinks)."""
        import ray

        if dead in self._runners:
            self._runners.remove(dead)
        try:
            ray.kill(dead.actor)
        except Exception:  # noqa: BLE001 - already gone
            pass
        used = collections.Counter(r.node_id for r in self._runners)
        # the dead runner's own node last (it may be the node that is gone, still listed alive
        # for a moment), and only briefly
        free = [(n == dead.node_id, used[n], n)
                for n, s in runner_nodes(self.config.device, self._cpus).items() if used[n] < s]
        for same_node, _, node_id in sorted(free):
            timeout = min(self.config.placement_timeout_s, 20.0) if same_node else self.config.placement_timeout_s
            try:
                self._start(node_id, timeout_s=timeout)
                self.stats.replaced += 1
                return
            except HiertuneError:
                continue  # that node is full or gone: try the next, else run on with fewer runners

    @property
    def size(self) -> int:
        return len(self._runners)

    def nodes(self) -> list[str]:
        """Node id of each live runner."""
        return [r.node_id for r in self._runners]

    # ------------------------------------------------------------------ measuring
    def _chunk_size(self, queued: int) -> int:
        if self.chunk is not None:
            return self.chunk
        return max(1, math.ceil(queued / max(1, len(self._runners) * self.depth)))

    def measure(self, inputs: list[MeasureInput]) -> list[MeasureResult]:
        """One result per input, in input order; chunks go to whichever runner is free first."""
        import ray

        total = len(inputs)
        results: list[MeasureResult | None] = [None] * total
        self.last_nodes = [None] * total
        if not inputs:
            return []
        refs = [ray.put(i) for i in inputs]  # serialised once, even when re-sent
        queue = collections.deque(range(total))
        attempts = [0] * total
        in_flight: dict[Any, _Call] = {}
        lost_on: dict[int, str] = {}  # candidate -> node of the runner that died holding it
        moved: collections.Counter = collections.Counter()  # (lost node, node that measured it)
        done = 0

        def dispatch() -> None:
            size = self._chunk_size(len(queue))
            for runner in sorted(self._runners, key=lambda r: r.in_flight):
                while queue and runner.in_flight < self.depth:
                    chunk = [queue.popleft() for _ in range(min(size, len(queue)))]
                    for index in chunk:
                        attempts[index] += 1
                    ref = runner.actor.measure_refs.remote(*[refs[i] for i in chunk])
                    in_flight[ref] = _Call(chunk, runner, time.monotonic())
                    runner.in_flight += 1
                    self.stats.dispatched += 1

        def finish(index: int, result: MeasureResult, node: str | None) -> None:
            nonlocal done
            results[index] = result
            self.last_nodes[index] = node
            if node is not None:
                self.stats.per_node[node] += 1
                if lost_on.get(index, node) != node:
                    moved[lost_on[index], node] += 1
            done += 1

        def requeue(indices: list[int], err: BaseException) -> None:
            """Back to the front of the queue (ascending), or failed after `max_attempts`."""
            again = []
            for index in indices:
                if attempts[index] >= self.max_attempts:
                    reason = str(err).splitlines()[0][:200]
                    finish(index, MeasureResult(None, f"runner died {attempts[index]} times on this candidate: "
                                                      f"{reason}"), None)
                else:
                    again.append(index)
            self.stats.requeued += len(again)
            queue.extendleft(sorted(again, reverse=True))

        def drop_runner(runner: _Runner, err: BaseException) -> None:
            """A dead or hung runner: re-queue all its calls in flight, replace it."""
            for ref, call in list(in_flight.items()):
                if call.runner is runner:
                    del in_flight[ref]
                    lost_on.update(dict.fromkeys(call.indices, runner.node_id))
                    requeue(call.indices, err)
            runner.in_flight = 0
            self._replace(runner)

        while done < total:
            dispatch()
            if not in_flight:  # every runner is gone and none could be replaced
                for index in list(queue):
                    finish(index, MeasureResult(None, "no live measurement runner left in the cluster"), None)
                queue.clear()
                break
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=5.0)
            if not ready:
                now = time.monotonic()
                for ref, call in list(in_flight.items()):
                    limit = 120 + len(call.indices) * (self.config.build_timeout_s + self.config.run_timeout_s)
                    if ref in in_flight and now - call.started > limit:  # hung: fail its chunk, replace runner
                        del in_flight[ref]
                        for index in call.indices:
                            finish(index, MeasureResult(None, "runner timed out while measuring this candidate"), None)
                        drop_runner(call.runner, TimeoutError("runner replaced after a timeout"))
                continue
            call = in_flight.pop(ready[0])
            call.runner.in_flight -= 1
            try:
                chunk_results = ray.get(ready[0])
            except ray.exceptions.RayTaskError as err:  # the measurer raised: this chunk fails
                chunk_results = [MeasureResult(None, f"runner raised: {str(err).splitlines()[0][:300]}")
                                 for _ in call.indices]
            except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError) as err:
                # the runner (or its node) died: this chunk and its other pending ones go back
                self.stats.lost_runners += 1
                lost_on.update(dict.fromkeys(call.indices, call.runner.node_id))
                requeue(call.indices, err)
                if call.runner in self._runners:
                    drop_runner(call.runner, err)
                continue
            for index, result in zip(call.indices, chunk_results):
                finish(index, result, call.runner.node_id)
            if self.on_result is not None:
                dispatch()  # keep runners busy while the callback runs
                self.on_result(done, total)
        if moved:
            self._report_moved(moved)
        return results  # type: ignore[return-value]

    def _report_moved(self, moved: collections.Counter) -> None:
        """Say where a lost runner's candidates were measured instead (by node address)."""
        import ray

        address = {n["NodeID"]: n.get("NodeManagerAddress", n["NodeID"][:8]) for n in ray.nodes()}
        self.stats.remeasured_elsewhere += sum(moved.values())
        for (lost, node), count in sorted(moved.items()):
            log.warning("%d candidate(s) in flight on the lost runner at %s measured again on %s",
                        count, address.get(lost, lost[:8]), address.get(node, node[:8]))

    def close(self) -> None:
        import ray

        for runner in self._runners:
            try:
                ray.kill(runner.actor)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self._runners = []


def _round_robin(slots: dict[str, int], count: int) -> list[str]:
    """`count` node ids, one per node first, then second slots, ... (so runners spread)."""
    left = dict(slots)
    order: list[str] = []
    while len(order) < count:
        for node_id in list(left):
            if len(order) == count:
                break
            if left[node_id] > 0:
                order.append(node_id)
                left[node_id] -= 1
    return order


def create_pool(config: RunnerConfig, num_runners: int | None = None, **kwargs: Any) -> RunnerPool:
    """A pool of runners: one per node that has the resource (None) or `num_runners` spread over them."""
    return RunnerPool(config, num_runners=num_runners, **kwargs)
