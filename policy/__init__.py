"""The kns-platform policy pack (run by `pulumi preview|up --policy-pack policy`)."""
