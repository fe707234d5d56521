"""ComponentResources of kns-platform, one concept per module.

Nothing is imported here so that pure modules (`components.manifests`) load without
the Pulumi runtime.
"""
