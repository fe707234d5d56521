"""RFC 6901 JSON pointers that set values, adding what is missing (RStudio-style overrides)."""

from __future__ import annotations

import copy
import re
from typing import Any, Optional

from . import rules

# Overrides may not rename, move or retype the object: names derive from the entry.
PROTECTED = ("/apiVersion", "/kind", "/metadata/name", "/metadata/namespace")


class PointerError(ValueError):
    """The pointer cannot be applied; the message is user-facing."""


def syntax_problem(pointer: str) -> Optional[str]:
    """Why `pointer` is no JSON pointer, or None. What does not start with "/" is not
    repeated: it may be a value written in the place of the path."""
    return None if re.match(rules.JSON_POINTER.pattern, pointer) else f"is {rules.JSON_POINTER.message}"


def tokens(pointer: str) -> list[str]:
    if pointer == "":
        raise PointerError('"" points at the whole object; point inside it (for example "/spec/backoffLimit")')
    problem = syntax_problem(pointer)
    if problem:
        raise PointerError(problem)
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def set_pointer(document: dict[str, Any], pointer: str, value: Any) -> None:
    """Set `value` at `pointer` in place, creating missing objects on the way; `-` or the
    length of a list appends."""
    for protected in PROTECTED:
        if pointer == protected or pointer.startswith(protected + "/"):
            raise PointerError(f'"{pointer}" may not be overridden: names and kinds derive from the entry')
    parts = tokens(pointer)
    current: Any = document
    for depth, token in enumerate(parts):
        last = depth == len(parts) - 1
        where = "/" + "/".join(parts[: depth + 1])
        if isinstance(current, dict):
            if last:
                current[token] = copy.deepcopy(value)
                return
            if token not in current:
                current[token] = [] if _indexes(parts[depth + 1]) else {}
            elif not isinstance(current[token], (dict, list)):
                raise PointerError(f'"{pointer}": "{where}" holds a {type(current[token]).__name__}, not an object or list')
            current = current[token]
        elif isinstance(current, list):
            if token == "-":
                index = len(current)
            elif token.isdigit() and (token == "0" or not token.startswith("0")):
                index = int(token)
            else:
                raise PointerError(f'"{pointer}": "{token}" is not a list index at "{where}"')
            if index > len(current):
                raise PointerError(f'"{pointer}": index {index} is past the end of a list of {len(current)} at "{where}"')
            if last:
                if index == len(current):
                    current.append(copy.deepcopy(value))
                else:
                    current[index] = copy.deepcopy(value)
                return
            if index == len(current):
                current.append([] if _indexes(parts[depth + 1]) else {})
            elif not isinstance(current[index], (dict, list)):
                raise PointerError(f'"{pointer}": "{where}" holds a {type(current[index]).__name__}, not an object or list')
            current = current[index]


def _indexes(token: str) -> bool:
    """Whether a token addresses a list element (`-` or a non-negative integer)."""
    return token == "-" or (token.isdigit() and (token == "0" or not token.startswith("0")))
