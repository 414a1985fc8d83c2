"""The one build of the operator (`op`), build.toml read in one place (`config`), and its reproducibility check (`repro_check`)."""
