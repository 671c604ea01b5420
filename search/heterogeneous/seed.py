"""Seeding: heuristic skeletons, as sampled values, that a heterogeneous study starts from.

Two kinds: the best homogeneous plans (the single-GPU-type baselines) written as one-group
skeletons, and the textbook spanning layouts (every group, fastest zone first, and each zone's
groups on their own, tp = a node).
"""

from typing import Any

from costmodel.specs import ClusterSpec, NodeGroup, Plan
from search.heterogeneous.skeleton import SHARES, group_speed


def share_covering(used: int, capacity: int) -> float:
    """The smallest share of ``capacity`` that covers ``used``."""
    return next((share for share in SHARES if share * capacity >= used), SHARES[-1])


def homogeneous_seed(
    plan: Plan, global_batch_size: int, names: list[str], cluster: ClusterSpec
) -> dict[str, Any] | None:
    """A homogeneous plan as a one-group skeleton; None if its group is not searched."""
    group = plan.group or names[0]
    if group not in names:
        return None
    capacity = cluster.group(group).num_gpus
    return {
        "layout": "stages",
        "global_batch_size": global_batch_size,
        "groups": group,
        "order": ">".join([group, *[n for n in names if n != group]]),
        "cp": plan.cp,
        "dp": plan.dp,
        f"stages:{group}": plan.pp,
        f"share:{group}": share_covering(plan.pp * plan.tp * plan.dp * plan.cp, capacity),
        "micro_batch_size": plan.micro_batch_size,
        "vpp": plan.vpp,
        "zero_stage": plan.zero_stage,
        "offload_optimizer": plan.offload_optimizer,
        "recompute": plan.recompute,
        "sequence_parallel": plan.sp,
    }


def spanning_seeds(
    groups: list[NodeGroup], cluster: ClusterSpec, precision: str
) -> list[dict[str, Any]]:
    """The textbook spanning layouts over ``groups`` (the searched ones, in search order):
    every group (fastest zone first), and every zone's groups on their own; tp = a node."""
    names = [group.name for group in groups]
    zones: dict[str, list[str]] = {}
    for group in groups:
        zones.setdefault(group.zone, []).append(group.name)
    by_speed = sorted(groups, key=lambda g: -group_speed(g, precision))
    zone_order = list(dict.fromkeys(g.zone for g in by_speed))
    ordered = [name for zone in zone_order for name in zones[zone]]
    sets = [ordered] + [members for members in zones.values() if len(members) > 1]
    seeds = []
    for members in sets:
        if len(members) < 2:
            continue
        smallest = min(cluster.group(n).num_gpus for n in members)
        node = min(cluster.group(n).gpus_per_node for n in members)
        params: dict[str, Any] = {
            "layout": "stages",
            "groups": "+".join(n for n in names if n in members),
            "order": ">".join([*members, *[n for n in names if n not in members]]),
            "cp": 1,
            "dp": max(1, smallest // node),
            "micro_batch_size": 1,
            "vpp": 1,
            "zero_stage": 1,
            "offload_optimizer": False,
            "recompute": "selective",
            "sequence_parallel": True,
        }
        for name in members:
            params[f"stages:{name}"] = max(1, cluster.group(name).num_gpus // (node * params["dp"]))
            params[f"share:{name}"] = 1.0
        seeds.append(params)
    return seeds
