"""What the tests and the benchmarks share: the program under recording Pulumi mocks, a
component from a hand-made plan, and the engine project copy (`program`), the local control
plane driver (`cluster`), the two doors of bad input (`doors`), the component type tokens the
tests expect (`tokens`), and the stacks several test modules read (`sites`, `queueing`,
`autoscale`, `reserving`, ...). A test module imports from here, never from another test
module (tests/test_suite_rules.py, tests/test_layers.py)."""
