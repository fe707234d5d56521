"""The old home of the program harness, kept so that tests written against it still run;
import `kns_testing.program` instead."""

from kns_testing.program import (  # noqa: F401
    MAIN,
    PROJECT_FILES,
    ROOT,
    RecordingMocks,
    Registered,
    Run,
    dev_stack_config,
    encode_config,
    engine_project,
    run_program,
    secret_value,
)
