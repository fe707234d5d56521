"""A client of the API server for the platform's own pods (the reservation switch, the
budget counters): standard library only, through the pod's service account token, as the
pods run it beside their script (plan/reservations.py lays it out in their ConfigMap)."""

from __future__ import annotations

import json
import os
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from typing import Any, Callable, Iterator, Optional

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class ApiError(RuntimeError):
    """A request the API server refused (the message has the method, path and answer)."""


class Api:
    """The API server through the pod's own service account token; a subclass names the
    field manager its server-side applies write as."""

    field_manager = "kns"

    def __init__(self, server: str, token: str, ca_file: Optional[str]):
        self.server = server.rstrip("/")
        self.token = token
        self.context = ssl.create_default_context(cafile=ca_file) if ca_file else ssl.create_default_context()

    @classmethod
    def in_pod(cls, environ: dict[str, str]) -> "Api":
        folder = environ.get("KNS_SERVICE_ACCOUNT_DIR", SERVICE_ACCOUNT_DIR)
        with open(os.path.join(folder, "token"), encoding="utf-8") as handle:
            token = handle.read().strip()
        host, port = environ["KUBERNETES_SERVICE_HOST"], environ.get("KUBERNETES_SERVICE_PORT", "443")
        host = f"[{host}]" if ":" in host else host
        return cls(f"https://{host}:{port}", token, os.path.join(folder, "ca.crt"))

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
             missing_ok: bool = False) -> Optional[dict]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Accept": "application/json", "Content-Type": content_type})
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=30) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            if missing_ok and error.code == 404:
                return None
            if method == "POST" and error.code == 409:
                return None  # created by an earlier run: the same object
            raise ApiError(f"{method} {path}: {error.code} {error.read().decode(errors='replace')[:400]}") from None

    def pages(self, path: str, size: int = 500) -> Iterator[list[dict]]:
        """The items of a list a page at a time (`limit`/`continue`), so the caller keeps
        only what it needs: its memory grows with that, not with the cluster."""
        token = None
        while True:
            query = f"?limit={size}" + (f"&continue={urllib.parse.quote(token)}" if token else "")
            page = self.call("GET", path + query) or {}
            yield page.get("items") or []
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return

    def apply(self, path: str, body: dict) -> None:
        """A server-side apply as `field_manager`: the fields it sends are its own."""
        self.call("PATCH", f"{path}?fieldManager={self.field_manager}&force=true", body, "application/apply-patch+yaml")


def pod_main(environ: dict[str, str], variable: str, program: str,
             act: Callable[["Api", dict[str, Any], datetime], Any],
             connect: Optional[Callable[[dict[str, str], dict[str, Any]], "Api"]] = None) -> int:
    """A platform pod's one pass: its spec (JSON in `variable`), `act(api, spec, now)`, and
    what it did on stdout; an API refusal on stderr, exit 1 (the Job retries)."""
    spec = json.loads(environ[variable])
    now = datetime.now(timezone.utc)
    api = connect(environ, spec) if connect else Api.in_pod(environ)
    try:
        done = act(api, spec, now)
    except ApiError as error:
        print(f"{program} {spec['name']}: {error}", file=sys.stderr)
        return 1
    print(f"{program} {spec['name']} at {now.isoformat()}: {json.dumps(done, sort_keys=True, default=str)}")
    return 0
