"""What the tests and the benchmarks share: the program under recording Pulumi mocks and
the engine project copy (`program`), the local control plane driver (`cluster`)."""
