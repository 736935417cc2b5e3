"""Schemathesis hooks for tests/schemathesis/run.sh (loaded through SCHEMATHESIS_HOOKS).

`a2a_peer_refused`: each official A2A task an owner's SendMessage created (REST or JSON-RPC) is
read back: the owner's GetTask finds it, the peer's GetTask (both bindings) is
TaskNotFoundError and the peer's ListTasks does not list it.

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


def _a2a_task(response):
    """The id of the task an A2A answer holds: a SendMessage's over REST (`{"task": ...}`) or
    JSON-RPC (`{"result": {"task": ...}}`)."""
    try:
        body = response.json()
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    result = body.get("result")
    task = body.get("task") if "task" in body else (result.get("task") if isinstance(result, dict) else None)
    if isinstance(task, dict) and isinstance(task.get("id"), str):
        return task["id"]
    return None


@schemathesis.check
def a2a_peer_refused(ctx, response, case):
    """An official A2A task the owner's message created is the owner's alone: the peer's GetTask
    (REST and JSON-RPC) is TaskNotFoundError, and the peer's ListTasks does not list it, while
    the owner's GetTask finds it."""
    if case.method.upper() != "POST" or response.status_code != 200:
        return None
    match = re.match(r"^/agents/([^/]+)/(message:send|jsonrpc)$", case.formatted_path)
    if not match:
        return None
    owner = f"Bearer {OWNER}"
    sent = case.headers or {}
    if owner not in (sent.get("Authorization"), response.request.headers.get("Authorization")):
        return None
    task_id = _a2a_task(response)
    if task_id is None:
        return None
    agent = match.group(1)
    base = case.operation.base_url.rstrip("/")
    headers = {"A2A-Version": "1.0"}
    path = f"{base}/agents/{agent}/tasks/{requests.utils.quote(task_id, safe='')}"
    mine = requests.get(path, headers={**headers, "Authorization": owner}, timeout=5)
    if mine.status_code != 200:
        raise AssertionError(f"the owner's GetTask of its task {task_id!r} answered {mine.status_code}")
    peer = {**headers, "Authorization": f"Bearer {PEER}"}
    theirs = requests.get(path, headers=peer, timeout=5)
    if theirs.status_code != 404:
        raise AssertionError(f"the peer's GetTask of another client's A2A task answered {theirs.status_code}")
    rpc = requests.post(
        f"{base}/agents/{agent}/jsonrpc",
        headers={**peer, "Content-Type": "application/json"},
        json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}},
        timeout=5,
    ).json()
    if (rpc.get("error") or {}).get("code") != -32001:
        raise AssertionError(f"the peer's JSON-RPC GetTask of another client's A2A task: {rpc}")
    listed = requests.get(f"{base}/agents/{agent}/tasks?pageSize=100", headers=peer, timeout=5).json()
    if any(t.get("id") == task_id for t in listed.get("tasks", [])):
        raise AssertionError(f"the peer's ListTasks lists another client's A2A task {task_id!r}")
    return None
