#!/usr/bin/env python3
"""Post the preview summaries on a pull request as one comment, updated on every push.

    GITHUB_TOKEN=... GITHUB_REPOSITORY=owner/repo scripts/pr-comment.py 58 build/summary-*.md

Reviewers read the pull request, not the run's page; one comment per pull request, edited
in place, keeps the conversation free of a comment per push. The comment is found by the
hidden MARKER among the pull request's comments (every page of
`GET /repos/{owner}/{repo}/issues/{n}/comments`) written by the workflow's own identity
(`--author`, `github-actions[bot]` for the GITHUB_TOKEN): a person's comment quoting the
marker is never edited. Found, it is replaced (`PATCH .../issues/comments/{id}`); else one
is posted (`POST .../issues/{n}/comments`).

GitHub refuses a comment over 65,536 characters: a longer body is cut at a line and ends
with a pointer to the run, whose artifacts keep every summary and log whole. The token is
sent as a header only, and never printed. The API base is GITHUB_API_URL (GitHub
Enterprise Server has its own). Stdlib only: the commenting job installs nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Optional, Sequence

MARKER = "<!-- kns-preview -->"
LIMIT = 65_536
DEFAULT_AUTHOR = "github-actions[bot]"


class ApiError(Exception):
    pass


class Api:
    def __init__(self, base: str, token: str):
        self.base = base.rstrip("/")
        self._token = token

    def request(self, method: str, url: str, body: Optional[dict] = None) -> tuple[Any, dict[str, str]]:
        """The decoded JSON answer and the response headers; ApiError (status and GitHub's
        message, never the request's headers) otherwise."""
        if not url.startswith(("http://", "https://")):
            url = self.base + url
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method, headers={
            "Authorization": f"Bearer {self._token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "kns-platform-pr-comment",
            **({"Content-Type": "application/json"} if data is not None else {}),
        })
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                text = response.read().decode()
                return (json.loads(text) if text else None), dict(response.headers.items())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            raise ApiError(f"{method} {url.split('?', 1)[0]}: HTTP {exc.code}: {detail}") from None
        except urllib.error.URLError as exc:
            raise ApiError(f"{method} {url.split('?', 1)[0]}: {exc.reason}") from None

    def pages(self, path: str) -> list[Any]:
        """Every item of a listing, following the `Link: <...>; rel="next"` headers."""
        items: list[Any] = []
        url: Optional[str] = f"{path}{'&' if '?' in path else '?'}per_page=100"
        while url:
            page, headers = self.request("GET", url)
            items.extend(page or [])
            link = next((v for k, v in headers.items() if k.lower() == "link"), "")
            found = re.search(r'<([^>]+)>;\s*rel="next"', link)
            url = found[1] if found else None
        return items


def body(summaries: Sequence[str], run_url: Optional[str], head: Optional[str]) -> str:
    """The comment: marker, heading, every summary, and where the logs are; cut to LIMIT."""
    where = f"[the run]({run_url})" if run_url else "the workflow run"
    heading = f"{MARKER}\n# Pulumi preview" + (f" of `{head[:12]}`" if head else "") + "\n\n"
    footer = f"\n\n---\nThe full diff logs and these summaries are the artifacts `preview-<stack>` of {where}.\n"
    text = "\n\n".join(s.strip() for s in summaries if s.strip()) or (
        "No stack produced a summary (the previews failed or were skipped before one was written).")
    if len(heading) + len(text) + len(footer) <= LIMIT:
        return heading + text + footer
    cut = f"\n\n**Truncated:** a comment holds at most {LIMIT:,} characters; the rest is in {where}."
    room = LIMIT - len(heading) - len(cut) - len(footer)
    kept = text[:room]
    kept = kept[:kept.rfind("\n")] if "\n" in kept else kept
    return heading + kept + cut + footer


def upsert(api: Api, repository: str, number: int, text: str, author: str) -> tuple[str, int]:
    """("updated" or "posted", the comment's id)."""
    comments = api.pages(f"/repos/{repository}/issues/{number}/comments")
    ours = [c for c in comments if MARKER in (c.get("body") or "") and (c.get("user") or {}).get("login") == author]
    if ours:
        comment_id = ours[0]["id"]
        api.request("PATCH", f"/repos/{repository}/issues/comments/{comment_id}", {"body": text})
        return "updated", comment_id
    made, _ = api.request("POST", f"/repos/{repository}/issues/{number}/comments", {"body": text})
    return "posted", made["id"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Post or update the one preview comment of a pull request.")
    parser.add_argument("number", type=int, help="the pull request's number")
    parser.add_argument("summaries", nargs="*", type=Path, help="markdown files (build/summary-<stack>.md)")
    parser.add_argument("--author", default=os.environ.get("KNS_COMMENT_AUTHOR", DEFAULT_AUTHOR),
                        help=f"the login whose marked comment is edited (default: {DEFAULT_AUTHOR})")
    parser.add_argument("--head", help="the commit previewed, named in the heading")
    args = parser.parse_args(argv)
    token, repository = os.environ.get("GITHUB_TOKEN", ""), os.environ.get("GITHUB_REPOSITORY", "")
    if not token or not repository:
        print("pr-comment: GITHUB_TOKEN and GITHUB_REPOSITORY must be set", file=sys.stderr)
        return 2
    server, run = os.environ.get("GITHUB_SERVER_URL", "https://github.com"), os.environ.get("GITHUB_RUN_ID")
    run_url = f"{server}/{repository}/actions/runs/{run}" if run else None
    text = body([p.read_text(encoding="utf-8") for p in sorted(args.summaries)], run_url, args.head)
    api = Api(os.environ.get("GITHUB_API_URL", "https://api.github.com"), token)
    try:
        done, comment_id = upsert(api, repository, args.number, text, args.author)
    except ApiError as exc:
        print(f"pr-comment: {exc}", file=sys.stderr)
        return 1
    print(f"pr-comment: {done} comment {comment_id} on pull request #{args.number} ({len(text):,} characters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
