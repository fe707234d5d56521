"""`kns`: offline commands over the stack config (validate, explain, timeline).

They read `Pulumi.<stack>.yaml` and the job files it names, and run the program's own
loader and planner (`config.loader.check_stack_config`, then `plan.planner.plan_checked`),
so what they report is what `pulumi preview` would report, without the Pulumi engine, a
cluster or the stack's passphrase. `./kns` at the repository root runs `python -m kns_cli`.
"""
