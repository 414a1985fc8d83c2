"""CI: the generated GitHub Actions workflow (`workflow`), the lowest-dependencies run of .ci/run (`lowest_deps`) and the Node judges the tests use (node/)."""
