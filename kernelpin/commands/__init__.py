"""kernelpin's commands: one module per command, each a library function the CLI renders."""
