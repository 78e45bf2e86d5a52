"""Multi-node checks on a real local Ray cluster (`ray.cluster_utils.Cluster`), run as a script.

`tests/test_cluster.py` runs this in a subprocess: a `Cluster` needs its own `ray.init`, which
cannot share a process with the test session's local Ray. One cluster serves every scenario
(starting one costs ~15 s): a head without CPUs (the driver), node A (1 CPU), node B (1 CPU,
`edgetpu`), node C (1 CPU, a declared GPU). The scenarios, in order:

  placement  the GPU runner lands on C, the Edge TPU actor on B (node id read inside the actor)
  cpu_pool   one CPU runner per node; then a worker node is removed mid-batch and its pending
             candidates are measured elsewhere; then a runner process is killed mid-batch and
             replaced on its node
  sweep      a 4-trial Inc-ILP sweep through Ray Tune completes on the cluster

Prints one JSON object (the facts the tests assert) as its last stdout line.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from hiertune.platform.ray_runtime import apply_env_defaults, ensure_local_token

apply_env_defaults()
ensure_local_token()  # this script starts its nodes itself (ray.cluster_utils.Cluster)
os.environ.setdefault("TVM_NUM_THREADS", "1")

SMALL_STORE = 80 * 1024**2
START_S = 240  # a runner imports TVM as it starts: slow when 3 start at once on 2 busy cores


def gemm_inputs(count: int) -> list:
    from tvm.s_tir import meta_schedule as ms

    from hiertune.workloads import get_workload
    from hiertune.platform.runners import MeasureInput
    from hiertune.workloads.tvm_support import make_target

    mod = get_workload("GMM-S").tasks[0].mod
    ctx = ms.TuneContext(mod=mod, target=make_target("llvm", num_cores=1), space_generator="post-order-apply",
                         search_strategy="evolutionary", num_threads=1)
    sketches = [MeasureInput.from_schedule(sch) for sch in ctx.generate_design_space()]
    return [sketches[i % len(sketches)] for i in range(count)]


def placement() -> dict:
    """GPU runner and Edge TPU actor first (they need node C's / B's only CPU), then CPU runners."""
    import ray

    from hiertune.platform.runner_pool import create_pool, spread_actor
    from hiertune.platform.runners import RunnerConfig

    class Probe:  # stands in for an Edge TPU stage; defined here so Ray ships it by value
        def ready(self) -> str:
            return ray.get_runtime_context().get_node_id()

    out: dict = {}
    gpu = create_pool(RunnerConfig(target="cuda", device="gpu", placement_timeout_s=START_S))
    try:
        out["gpu_runner_nodes"] = [ray.get(r.actor.ready.remote())["node_id"] for r in gpu._runners]
    finally:
        gpu.close()
    probe = spread_actor(Probe, "edgetpu", None, num_cpus=0, timeout_s=30, what="edge tpu probe")
    out["edgetpu_node"] = ray.get(probe.ready.remote())
    ray.kill(probe)
    return out


def cpu_pool_and_node_loss(cluster, handles: dict) -> dict:
    """One CPU runner per node (A, B, C), checked inside the actors; then a batch in two calls of
    one candidate per runner and, after the first result, the node of a runner holding two calls
    is removed. Its second call has not started then, so something is always re-queued (with one
    call of two candidates each, the victim's call could finish just before the removal, and
    nothing would be: a CI run saw that)."""
    import ray

    from hiertune.platform.runner_pool import create_pool
    from hiertune.platform.runners import RunnerConfig

    out: dict = {}
    t0 = time.monotonic()
    pool = create_pool(RunnerConfig(num_cpus=1, placement_timeout_s=START_S, number=1, min_repeat_ms=10))
    out["start_s"] = time.monotonic() - t0
    try:
        reported = ray.get([r.actor.ready.remote() for r in pool._runners])
        out["cpu_runner_nodes"] = sorted(r["node_id"] for r in reported)

        removed: dict = {}

        def on_result(done: int, total: int) -> None:
            if removed:
                return
            victim = max(pool._runners, key=lambda r: r.in_flight)
            removed.update(node=victim.node_id, in_flight=victim.in_flight,
                           measured_there_before=sum(1 for n in pool.last_nodes if n == victim.node_id))
            t0 = time.monotonic()
            cluster.remove_node(next(h for h in handles.values() if h.node_id == victim.node_id))
            removed["remove_s"] = time.monotonic() - t0

        pool.chunk, pool.depth, pool.on_result = 1, 2, on_result  # two calls of 1 per runner
        start = time.monotonic()
        results = pool.measure(gemm_inputs(6))
        out["node_loss"] = {
            "count": len(results),
            "ok": [r.ok for r in results],
            "errors": [r.error for r in results if not r.ok],
            "removed_node": removed.get("node"),
            "in_flight_on_removed": removed.get("in_flight"),
            "measured_on_removed": sum(1 for n in pool.last_nodes if n == removed.get("node")),
            "measured_there_before": removed.get("measured_there_before"),
            "results_per_node": sum(pool.stats.per_node.values()),
            "requeued": pool.stats.requeued,
            "lost_runners": pool.stats.lost_runners,
            "remeasured_elsewhere": pool.stats.remeasured_elsewhere,
            "runners_after": pool.size,
            "seconds": time.monotonic() - start,
            "remove_s": removed.get("remove_s"),
        }

        # a runner process killed (its node stays): the runner is replaced, its work re-queued.
        # Two calls of one candidate per runner, and the victim is the runner holding two: its
        # second call has not started when it dies, so something is always re-queued (with one
        # call each, the victim's call could finish just before the kill and nothing would be).
        killed: dict = {}

        def kill_one(done: int, total: int) -> None:
            if killed:
                return
            victim = max(pool._runners, key=lambda r: r.in_flight)
            killed.update(node=victim.node_id, in_flight=victim.in_flight)
            ray.kill(victim.actor)

        pool.chunk, pool.depth, pool.on_result = 1, 2, kill_one
        requeued_before, replaced_before = pool.stats.requeued, pool.stats.replaced
        results = pool.measure(gemm_inputs(4))
        out["runner_kill"] = {
            "count": len(results), "ok": [r.ok for r in results], "errors": [r.error for r in results if not r.ok],
            "requeued": pool.stats.requeued - requeued_before, "replaced": pool.stats.replaced - replaced_before,
            "runners_after": pool.size, "killed_node": killed.get("node"), "killed_in_flight": killed.get("in_flight"),
            "replacement_on": sorted(pool.nodes()),
        }
    finally:
        pool.close()
    return out


def sweep(work: Path) -> dict:
    from hiertune.cli import main
    from hiertune.envs.synthetic_dags import SyntheticDagConfig, generate_dag

    graph_path = work / "dag.json"
    generate_dag(3, SyntheticDagConfig(num_nodes=40)).save_json(graph_path)
    start = time.monotonic()
    code = main([
        "sweep", "incilp", "--model", str(graph_path), "--stages", "3", "--param", "gamma=0,2,5,inf",
        "--search", "grid", "--out", str(work / "sweep"),
    ])
    summary = json.loads((work / "sweep" / "sweep.json").read_text())
    return {"code": code, "seconds": time.monotonic() - start, "trials": len(summary["trials"]),
            "statuses": [t["status"] for t in summary["trials"]], "best": summary["best"]["config"],
            "best_reached": summary["best"]["metrics"]["reached_optimum"],
            "reached": {str(t["config"]["gamma"]): t["metrics"]["reached_optimum"] for t in summary["trials"]},
            "png": (work / "sweep" / "sweep.png").exists()}


def main() -> None:
    import ray
    from ray.cluster_utils import Cluster

    scenarios = sys.argv[1:] or ["placement", "cpu_pool", "sweep"]
    begin = time.monotonic()
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": False, "object_store_memory": SMALL_STORE,
        "_system_config": {"enable_worker_prestart": False},
    })
    handles = {"head": cluster.head_node}
    handles["a"] = cluster.add_node(num_cpus=1, object_store_memory=SMALL_STORE)
    handles["b"] = cluster.add_node(num_cpus=1, resources={"edgetpu": 1}, object_store_memory=SMALL_STORE)
    handles["c"] = cluster.add_node(num_cpus=1, num_gpus=1, object_store_memory=SMALL_STORE)
    out: dict = {"nodes": {k: h.node_id for k, h in handles.items()}}
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        cluster.wait_for_nodes()
        print(f"cluster up: {time.monotonic() - begin:.1f} s", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            for name in scenarios:
                t0 = time.monotonic()
                if name == "placement":
                    out[name] = placement()
                elif name == "cpu_pool":
                    out[name] = cpu_pool_and_node_loss(cluster, handles)
                elif name == "sweep":
                    out[name] = sweep(Path(tmp))
                print(f"{name}: {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
    finally:
        ray.shutdown()
        cluster.shutdown()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
