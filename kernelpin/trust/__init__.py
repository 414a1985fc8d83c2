"""Who may publish and sign: the publisher policy, Sigstore verification, its worker and receipts."""
