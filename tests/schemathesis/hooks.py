"""Schemathesis hooks for tests/schemathesis/run.sh (loaded through SCHEMATHESIS_HOOKS).

`peer_refused`: the built-in `object_level_authorization` compares JSON bodies, so it judges a
task and its artifact list but not an artifact's content (the agent's bytes) or a task's event
stream. This check covers every read of a task's objects: each successful GET that the owner
(A2A_OWNER_KEY) made on a task, its artifacts, its stream or an artifact's content is sent again
with the peer's key (A2A_PEER_KEY), and fails unless the peer is refused (401, 403 or 404).
"""

import os
import re

import requests
import schemathesis

OWNER = os.environ["A2A_OWNER_KEY"]
PEER = os.environ["A2A_PEER_KEY"]

# What a task's owner reads: the task, its artifact list, its stream, an artifact's content.
OWNED = re.compile(r"^(/agents/[^/]+)?/(tasks/[^/]+(/artifacts|/stream)?|artifacts/[^/]+/content)$")


@schemathesis.check
def peer_refused(ctx, response, case):
    if case.method.upper() != "GET" or not 200 <= response.status_code < 400:
        return None
    path = case.formatted_path
    if not OWNED.match(path):
        return None
    # The owner's credential is on the case, or set by the auth provider on the request sent.
    owner = f"Bearer {OWNER}"
    sent = case.headers or {}
    if owner not in (sent.get("Authorization"), response.request.headers.get("Authorization")):
        return None
    headers = {k: v for k, v in sent.items() if k.lower() != "authorization"}
    headers["Authorization"] = f"Bearer {PEER}"
    query = {k: v for k, v in (case.query or {}).items() if k != "access_token"}
    url = case.operation.base_url.rstrip("/") + path
    # Streamed and closed at once: a stream the peer should not get would never end.
    with requests.get(url, headers=headers, params=query, stream=True, allow_redirects=False, timeout=5) as peer:
        status = peer.status_code
    if status not in (401, 403, 404):
        raise AssertionError(
            f"the peer got {status} for GET {path}, which the owner read ({response.status_code}); "
            "another client's task and its artifacts must be 404"
        )
    return None
