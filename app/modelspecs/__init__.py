"""Model specs: the stored ``ModelSpec`` registry (presets included) and Hugging Face import."""
