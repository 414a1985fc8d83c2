"""The GPU machine: everything that needs the GPU in one pass (session.sh, stable_abi.sh) and the offline release loop (`e2e`)."""
