"""Plans found by searches: ``GET /v1/plans/{id}``, and how a search's ranking is stored."""
