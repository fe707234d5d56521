"""ComponentResources of kns-platform, one per module: they turn plans (plan/) into
Pulumi resources and hold no planning of their own. See docs/architecture.md."""
