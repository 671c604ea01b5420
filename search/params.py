"""The sampled parameters of a trial space, and the neighbourhood of a point in it.

A trial space declares its parameters once (a static space: TPE's multivariate model, NSGA-II and
enqueued trials all need fixed distributions) and decodes any sampled point into a valid
candidate. Integer parameters carry a *ladder*, the sorted values they may usefully take, which
gives every point a neighbourhood: one parameter one rung up or down, or a categorical parameter
changed. Studies use it to polish the incumbent once the sampler starts repeating itself.
"""

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import optuna


@dataclass(frozen=True)
class Parameter:
    """One sampled parameter of a trial space: categorical, integer ladder or float range."""

    name: str
    kind: Literal["categorical", "int", "float"]
    choices: tuple[Any, ...]  # categorical: the choices; int: the ladder; float: (low, high)

    def suggest(self, trial: optuna.Trial) -> Any:
        """This parameter's value for ``trial``."""
        if self.kind == "categorical":
            return trial.suggest_categorical(self.name, list(self.choices))
        if self.kind == "int":
            return trial.suggest_int(self.name, self.choices[0], self.choices[-1], log=True)
        return trial.suggest_float(self.name, self.choices[0], self.choices[1])

    def neighbors(self, value: Any) -> list[Any]:
        """The values next to ``value``: other choices, or the adjacent rungs of the ladder."""
        if self.kind == "categorical":
            return [choice for choice in self.choices if choice != value]
        if self.kind == "int":
            ladder = np.asarray(self.choices, dtype=float)
            rung = int(np.argmin(np.abs(np.log(ladder) - np.log(max(float(value), 1e-9)))))
            return [self.choices[i] for i in (rung - 1, rung + 1) if 0 <= i < len(self.choices)]
        return []  # continuous keys: left to the sampler


def parameter(name: str, kind: Literal["categorical", "int", "float"], values: Sequence[Any]):
    """A Parameter, or None when there is nothing to choose."""
    choices = tuple(sorted(set(values))) if kind == "int" else tuple(values)
    if kind == "float":
        return Parameter(name, kind, choices) if choices[0] < choices[1] else None
    return Parameter(name, kind, choices) if len(choices) > 1 else None


def sample(trial: optuna.Trial, parameters: Sequence[Parameter]) -> dict[str, Any]:
    """Each parameter's value for ``trial``, by name."""
    return {p.name: p.suggest(trial) for p in parameters}


def neighborhood(parameters: Sequence[Parameter], point: dict[str, Any]) -> list[dict[str, Any]]:
    """Points that differ from ``point`` in one parameter by one step."""
    moves = []
    for p in parameters:
        if p.name not in point:
            continue
        for value in p.neighbors(point[p.name]):
            moves.append({**point, p.name: value})
    return moves


def trades(parameters: Sequence[Parameter], point: dict[str, Any]) -> list[dict[str, Any]]:
    """Points where one integer parameter steps up and another steps down.

    Parallel degrees trade against each other (dp x 2 with cp / 2 keeps the GPU count), so a
    plan that is locally best one parameter at a time is often improved by such a pair.
    """
    steps = {
        p.name: p.neighbors(point[p.name])
        for p in parameters
        if p.kind == "int" and p.name in point
    }
    moves = []
    for (first, first_steps), (second, second_steps) in itertools.permutations(steps.items(), 2):
        up = [v for v in first_steps if v > point[first]]
        down = [v for v in second_steps if v < point[second]]
        if up and down:
            moves.append({**point, first: up[0], second: down[0]})
    return moves


def random_point(parameters: Sequence[Parameter], rng: np.random.Generator) -> dict[str, Any]:
    """A uniform draw (integers: log-uniform over the ladder's range, then its nearest rung)."""
    point: dict[str, Any] = {}
    for p in parameters:
        if p.kind == "categorical":
            point[p.name] = p.choices[int(rng.integers(len(p.choices)))]
        elif p.kind == "int":
            ladder = np.asarray(p.choices, dtype=float)
            wanted = rng.uniform(np.log(ladder[0]), np.log(ladder[-1]))
            point[p.name] = p.choices[int(np.argmin(np.abs(np.log(ladder) - wanted)))]
        else:
            point[p.name] = float(rng.uniform(p.choices[0], p.choices[1]))
    return point
