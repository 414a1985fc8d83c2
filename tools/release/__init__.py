"""The Hub release: staging (`stage`, run as `python -m tools.release stage`), the ABI gate (`abi_gate`) and the stable-ABI shim table it reads (`stable_abi_shims`)."""
