"""Shared pydantic configuration for all specs, and the number types their fields use."""

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict
from pydantic_core import PydanticCustomError


def _refuse_bool_as_float(value: object) -> object:
    # pydantic's lax mode reads JSON true/false as 1/0; a boolean where a number is meant is a
    # client's mistake (`"price_per_gpu_hour": false`), not a price of 0.
    # The error type does not end in _type: the error formatters drop "_type" complaints of a
    # union branch (`gpu: str | GpuSpec`) when another branch has a real one, and this is one.
    if isinstance(value, bool):
        raise PydanticCustomError("number_not_bool", "Input should be a number, not a boolean")
    return value


def _refuse_bool_as_int(value: object) -> object:
    if isinstance(value, bool):
        raise PydanticCustomError("integer_not_bool", "Input should be an integer, not a boolean")
    return value


# Spec numbers: lax otherwise (an int for a float, numpy scalars from the search, numeric
# strings as YAML 1.1 reads `1e12`), but never a boolean. pydantic's strict mode would refuse
# booleans too, but also numpy integers and those YAML strings, which the CLI and search pass.
Number = Annotated[float, BeforeValidator(_refuse_bool_as_float)]
Integer = Annotated[int, BeforeValidator(_refuse_bool_as_int)]


class Spec(BaseModel):
    """Base class: unknown fields are errors and instances are immutable (hashable unless they
    hold lists, e.g. a ClusterSpec's groups). NaN and infinities are refused everywhere."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False
    )
