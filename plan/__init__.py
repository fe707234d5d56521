"""Plans: what every entry and scheduler becomes, as Kubernetes-shaped dicts.

The layer between config/ (read and check) and components/ (build): pure, no Pulumi
import, so the program, the offline `kns` commands and the tests share one planner. See
docs/architecture.md.
"""
