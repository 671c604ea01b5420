"""Search requests: presets resolve, JSON round-trips, and bad requests fail naming the field."""

import pytest
from pydantic import ValidationError

from search import SearchRequest, format_request_error
from tests.support.search_specs import SMALL_MODEL, SMALL_TRAINING

MODEL = SMALL_MODEL
TRAINING = SMALL_TRAINING
CLUSTER = {
    "name": "a100x16",
    "groups": [{"name": "a100", "gpu": "A100-40GB", "num_nodes": 2, "price_per_gpu_hour": 2.0}],
}
MIXED = {
    "name": "mixed",
    "groups": [
        {"name": "h100", "gpu": "H100-80GB", "num_nodes": 1, "zone": "east"},
        {"name": "a100", "gpu": "A100-80GB", "num_nodes": 2, "zone": "west"},
    ],
    "zone_links": [{"zones": ["east", "west"], "bandwidth_GBps": 12.5}],
}


def rejection(**fields: object) -> str:
    """The one-line reason a request built from ``fields`` (over small defaults) is refused."""
    base = {"model": MODEL, "training": TRAINING, "cluster": CLUSTER}
    with pytest.raises(ValidationError) as caught:
        SearchRequest(**{**base, **fields})  # type: ignore[arg-type]
    message = format_request_error(caught.value)
    assert "\n" not in message
    return message


def test_presets_resolve_and_the_request_round_trips_through_json() -> None:
    request = SearchRequest(
        model="gpt3-175b",
        training="gpt3-2k",
        cluster="dgx-h100-128n",
        constraints={"tp": [4, 8], "pp": {"min": 2}, "recompute": "selective"},
        max_memory_fraction=0.9,
    )
    assert request.model.name == "gpt3-175b"
    assert request.cluster.num_gpus == 1024
    again = SearchRequest.model_validate_json(request.model_dump_json())
    assert again == request


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # Impossible clusters.
        (
            {"model": "gpt3-175b"},
            "cluster: gpt3-175b needs at least 976 GiB of GPU memory",
        ),
        (
            {"cluster": {"groups": [{"name": "v100", "gpu": "V100-32GB", "num_nodes": 4}]}},
            "cluster: no node group can train in bf16",
        ),
        # Batch not divisible by any allowed layout.
        (
            {"training": {**TRAINING, "global_batch_size": 7}, "constraints": {"dp": [2, 4]}},
            "constraints.dp: no allowed value is valid (dp divides training.global_batch_size=7",
        ),
        (
            {
                "training": {**TRAINING, "global_batch_size": 8},
                "constraints": {"dp": 4, "micro_batch_size": 4},
            },
            "training.global_batch_size: 8 is not divisible by dp*micro_batch_size",
        ),
        (
            {"global_batch_sizes": [9], "constraints": {"dp": 2}},
            "constraints.dp: no allowed value is valid (dp divides global_batch_sizes=9",
        ),
        # Zero budgets.
        ({"trials": 0}, "trials: Input should be greater than or equal to 1"),
        ({"timeout_s": 0}, "timeout_s: Input should be greater than 0"),
        ({"top_k": 0}, "top_k: Input should be greater than or equal to 1"),
        # Constraints that make no sense.
        ({"constraints": {"tpp": 2}}, "constraints.tpp: unknown dimension"),
        ({"constraints": {"tp": 5}}, "constraints.tp: no allowed value is valid"),
        (
            {"constraints": {"tp": {"min": 8, "max": 2}}},
            "constraints.tp: range min (8) exceeds max (2)",
        ),
        ({"constraints": {"recompute": "most"}}, "constraints.recompute: unknown mode 'most'"),
        (
            {"constraints": {"sequence_parallel": 1}},
            "constraints.sequence_parallel: expected true or false",
        ),
        ({"constraints": {"ep": 2}}, "constraints.ep: no allowed value is valid"),
        ({"constraints": {"num_gpus": {"min": 17}}}, "constraints.num_gpus: no valid layout"),
        (
            {
                "constraints": {
                    "pp": 24,
                    "tp": 8,
                    "dp": 1,
                    "cp": 1,
                    "vpp": 1,
                    "num_gpus": {"max": 100},
                    "micro_batch_size": 1,
                }
            },
            "cluster: group 'a100' (16 GPUs) has fewer GPUs",
        ),
        # Objectives that need data the specs lack, samplers that cannot do the job.
        (
            {"objective": "time_to_train", "training": {**TRAINING, "train_tokens": None}},
            "objective: time_to_train needs training.train_tokens",
        ),
        (
            {
                "objective": "cost",
                "cluster": {"groups": [{"name": "a", "gpu": "A100-80GB", "num_nodes": 2}]},
            },
            "objective: cost needs a price",
        ),
        (
            {"sampler": "exhaustive", "cluster": MIXED},
            "sampler: exhaustive enumerates homogeneous plans on one node group",
        ),
        ({"sampler": "grid"}, "sampler: Input should be"),
        ({"groups": ["b200"]}, "groups: unknown node group 'b200'"),
        ({"model": "gpt-99"}, "model: unknown model 'gpt-99'"),
        (
            {"max_memory_fraction": 1.5},
            "max_memory_fraction: Input should be less than or equal to 1",
        ),
    ],
)
def test_bad_requests_are_rejected_with_a_reason_naming_the_field(
    fields: dict, expected: str
) -> None:
    assert rejection(**fields).startswith(expected)


def test_exhaustive_is_fine_on_one_group_of_a_mixed_cluster() -> None:
    request = SearchRequest(
        model=MODEL, training=TRAINING, cluster=MIXED, sampler="exhaustive", groups=["a100"]
    )
    assert [group.name for group in request.search_groups] == ["a100"]
