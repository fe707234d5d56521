"""Stack config: pydantic models, the one loader, and pure derivations (no Pulumi runtime needed)."""
