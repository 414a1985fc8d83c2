"""The GPU machine: everything that needs the GPU in one pass (session.sh, stable_abi.sh), the offline release loop (`e2e`) and the record of what passed (`record`, docs/verification.md)."""
