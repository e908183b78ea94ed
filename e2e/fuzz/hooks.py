"""Schemathesis hooks for scripts/fuzz (loaded through `hooks` in the generated config).

- Fresh idempotency keys: a request whose `Idempotency-Key` header is well formed gets a new
  UUID there and, if the body has one, the same UUID as the body's `idempotency_key` (the two
  must be equal). Otherwise generated keys would meet earlier keys with other bodies, and the run
  would test `idempotency_conflict` and `idempotency_key_mismatch` over and over. A malformed
  header (a negative case) is sent as generated.
- Whole numbers as integers: to JSON Schema `200.0` is an integer, but Tauros refuses money
  written as a JSON float (`float_not_allowed`, api.md), so a whole-number float is sent as the
  integer it equals (up to 2^64 - 1, the document's maximum). Fractions and negative whole
  numbers are sent as generated.

Schemathesis re-validates a case after these hooks, so its positive/negative labels stay true.
"""

import re
import uuid
from collections.abc import MutableMapping
from typing import Any

import schemathesis

HEADER_KEY = re.compile(r"^[!-~](?:[ -~]{0,198}[!-~])?$")


def whole_numbers_as_integers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and 0 <= value < 2**64:
        return int(value)
    if isinstance(value, dict):
        return {k: whole_numbers_as_integers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [whole_numbers_as_integers(v) for v in value]
    return value


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    if isinstance(case.body, (dict, list)):
        case.body = whole_numbers_as_integers(case.body)
    headers = case.headers if isinstance(case.headers, MutableMapping) else None
    body = case.body if isinstance(case.body, dict) else None
    header_key = headers.get("Idempotency-Key") if headers is not None else None
    fresh = str(uuid.uuid4())
    if headers is not None and isinstance(header_key, str):
        if not HEADER_KEY.fullmatch(header_key):
            return
        headers["Idempotency-Key"] = fresh
        if body is not None and "idempotency_key" in body:
            case.body = {**body, "idempotency_key": fresh}
    elif body is not None and isinstance(body.get("idempotency_key"), str):
        case.body = {**body, "idempotency_key": fresh}
