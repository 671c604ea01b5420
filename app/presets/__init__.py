"""The built-in catalog: GPU types, model/cluster/training/plan presets, and keeping the database's
copies of them in step with the installed package."""
