"""Plan search over the cost model: Optuna studies and exhaustive enumeration."""
