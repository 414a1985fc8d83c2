"""Files on disk: atomic writes, confined creation and removal, integrity checks, private state."""
