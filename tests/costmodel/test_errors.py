"""The one translator of validation errors: paths in one notation, one problem once."""

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from costmodel.errors import (
    FieldError,
    field_errors,
    field_path,
    format_validation_error,
    split_leading_path,
)


class Gpu(BaseModel):
    model_config = ConfigDict(extra="forbid")
    bf16_tflops: float = Field(gt=0)


class Group(BaseModel):
    name: str
    gpu: str | Gpu
    num_nodes: int = Field(ge=1)


class Cluster(BaseModel):
    groups: list[Group]
    tags: list[str] = []

    @field_validator("tags")
    @classmethod
    def _short(cls, tags: list[str]) -> list[str]:
        if any(len(tag) >= 4 for tag in tags):  # pytest rewrites a bare assert's message
            raise AssertionError("tags are short")
        return tags

    @model_validator(mode="after")
    def _named(self) -> "Cluster":
        if any(group.name == "bad" for group in self.groups):
            raise ValueError("groups[0].name: 'bad' is reserved")
        if any(group.name == "odd" for group in self.groups):
            raise ValueError("no group may be odd")
        return self


def errors_of(document: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        Cluster.model_validate(document)
    return caught.value


def test_paths_are_dotted_with_indexes_in_brackets() -> None:
    assert field_path(("groups", 0, "gpu")) == "groups[0].gpu"
    assert field_path(("groups", 0), prefix="cluster") == "cluster.groups[0]"
    assert field_path((0, "x")) == "[0].x"
    assert field_path(()) == ""


def test_union_member_names_leave_the_path_and_wrong_branches_give_way() -> None:
    exc = errors_of({"groups": [{"name": "a", "gpu": {"bf16_tflops": -1}, "num_nodes": 1}]})
    locs = [error["loc"] for error in exc.errors()]
    assert ("groups", 0, "gpu", "str") in locs  # pydantic's own view, for the record
    assert field_errors(exc) == [
        FieldError("groups[0].gpu.bf16_tflops", "Input should be greater than 0")
    ]


def test_all_branches_wrong_type_keeps_each_complaint_once() -> None:
    exc = errors_of({"groups": [{"name": "a", "gpu": 3, "num_nodes": 1}]})
    reasons = field_errors(exc)
    assert {error.path for error in reasons} == {"groups[0].gpu"}
    assert len(reasons) == len(set(reasons)) == 2
    line = format_validation_error(exc)
    assert line.startswith("groups[0].gpu: Input should be a valid string or ")


def test_validator_prefixes_are_dropped() -> None:
    exc = errors_of({"groups": [], "tags": ["toolong"]})
    assert field_errors(exc) == [FieldError("tags", "tags are short")]
    exc = errors_of({"groups": [{"name": "odd", "gpu": "H100", "num_nodes": 1}]})
    assert field_errors(exc) == [FieldError("", "no group may be odd")]
    assert format_validation_error(exc) == "no group may be odd"


def test_a_message_naming_its_field_is_blamed_on_that_field() -> None:
    exc = errors_of({"groups": [{"name": "bad", "gpu": "H100", "num_nodes": 1}]})
    assert field_errors(exc) == [FieldError("groups[0].name", "'bad' is reserved")]
    assert field_errors(exc, prefix="cluster") == [
        FieldError("cluster.groups[0].name", "'bad' is reserved")
    ]
    assert format_validation_error(exc, prefix="cluster") == (
        "cluster.groups[0].name: 'bad' is reserved"
    )


def test_a_leading_path_outside_the_location_stays_in_the_reason() -> None:
    errors = [{"loc": ("model",), "msg": "Value error, mla: head_dim must be unset", "type": "x"}]
    assert field_errors(errors) == [FieldError("model", "mla: head_dim must be unset")]
    inside = [{"loc": ("model",), "msg": "model.num_layers: too few", "type": "value_error"}]
    assert field_errors(inside) == [FieldError("model.num_layers", "too few")]


def test_split_leading_path() -> None:
    assert split_leading_path("constraints.tp: no allowed value") == (
        "constraints.tp",
        "no allowed value",
    )
    assert split_leading_path("cluster.groups[a100].price_per_gpu_hour: set it") == (
        "cluster.groups[a100].price_per_gpu_hour",
        "set it",
    )
    assert split_leading_path("top_k (5) exceeds num_experts (4)") == (
        None,
        "top_k (5) exceeds num_experts (4)",
    )
    assert split_leading_path("file 'x.yaml': bad") == (None, "file 'x.yaml': bad")


def test_error_dicts_and_sequence_prefixes_are_accepted() -> None:
    errors = [
        {"loc": ("groups", 1, "num_nodes"), "msg": "Input should be  greater\nthan 0", "type": "g"},
        {"loc": ("groups", 1, "num_nodes"), "msg": "Input should be greater than 0", "type": "g"},
        {"loc": (), "msg": "Assertion failed, whole input"},
    ]
    assert field_errors(errors, prefix=("body_of", 2)) == [
        FieldError("body_of[2].groups[1].num_nodes", "Input should be greater than 0"),
        FieldError("body_of[2]", "whole input"),
    ]


def test_one_line_counts_what_it_leaves_out() -> None:
    exc = errors_of({"groups": [{"name": str(i), "gpu": "H", "num_nodes": 0} for i in range(7)]})
    line = format_validation_error(exc, prefix="cluster")
    assert line.startswith("cluster.groups[0].num_nodes: Input should be greater than or equal")
    assert line.count("cluster.groups[") == 5
    assert line.endswith("; ... and 2 more")
    assert "\n" not in line
