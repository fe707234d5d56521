"""Naming rules: DNS-1123 labels, Kubernetes label keys and values, derived names.

Every derived name comes from an entry's stable key (its name), never from a list
position, so reordering or adding entries never renames (and so replaces) live objects.
"""

from __future__ import annotations

import re

from . import rules

MAX_ENTRY_NAME = 40
_DNS1123_LABEL = re.compile(rules.DNS1123_LABEL)
_LABEL_VALUE = re.compile(rules.LABEL_VALUE)
_LABEL_NAME = re.compile(rules.LABEL_NAME)
_DNS1123_SUBDOMAIN = re.compile(rules.DNS1123_SUBDOMAIN)

# Namespaces an entry must never take over.
RESERVED_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})

MANAGED_BY = {"app.kubernetes.io/managed-by": "pulumi"}
LABEL_POOL = "kns.io/pool"
LABEL_CLUSTER = "kns.io/cluster"
LABEL_JOB = "kns.io/job"
LABEL_OWNER = "kns.io/owner"


def dns1123_label_problem(value: str, max_length: int = 63) -> str | None:
    """Why `value` is not a DNS-1123 label of at most `max_length` characters, or None."""
    if len(value) > max_length:
        return f'"{value}" is {len(value)} characters long; at most {max_length} are allowed'
    if not _DNS1123_LABEL.match(value):
        return (
            f'"{value}" is not a DNS-1123 label (lower-case letters, digits and "-", '
            "starting and ending with a letter or digit)"
        )
    return None


def label_key_problem(key: str) -> str | None:
    """Why `key` is not a valid Kubernetes label/annotation key, or None."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return f'"{key}" has an invalid prefix "{prefix}" (must be a DNS subdomain)'
    if len(name) > 63 or not _LABEL_NAME.match(name):
        return (
            f'"{key}" is not a valid key (at most 63 letters, digits, "-", "_" or ".", '
            "optionally prefixed by a DNS subdomain and \"/\")"
        )
    return None


def label_value_problem(value: str) -> str | None:
    """Why `value` is not a valid Kubernetes label value, or None."""
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return (
            f'"{value}" is not a valid label value (at most 63 letters, digits, "-", "_" or ".", '
            "starting and ending with a letter or digit)"
        )
    return None


def namespace_name(prefix: str, entry: str) -> str:
    """The per-entry namespace: `<namespacePrefix><entry name>`."""
    return f"{prefix}{entry}"


def owner_label(user: str | None) -> str:
    """Value of `kns.io/owner`: the entry's user, or `platform` for unowned entries."""
    return user or "platform"
