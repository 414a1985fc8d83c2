"""The content-addressed store of verified kernel files, installing into it, hash receipts, parallel I/O."""
