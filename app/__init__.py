"""autopar application layer: HTTP service, database, CLI."""
