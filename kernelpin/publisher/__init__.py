"""The publisher's side of kernelpin: check a release layout (release), its shared libraries (abi_gate, with the
stable-ABI shim table) and upload it to the Hub (`kernelpin publish`). The consumer side (lock, sync, load)
never imports this package; both share the format modules (layout, variant, metadata, ranges, spec)."""
