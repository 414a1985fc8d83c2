"""Loading a locked, verified build into this process: the importer, LOCAL_KERNELS, python-depends."""
