"""OpenAI's files and batches endpoints on the scripted judge server.

``POST /v1/files`` (multipart: ``purpose``, ``file``), ``POST /v1/batches``, ``GET
/v1/batches/{id}``, ``GET /v1/files/{id}/content``. Each line of a batch is answered by the
server's script or responder, as a live request would be (it is recorded in ``requests`` with
the path ``/v1/chat/completions`` and ``batch`` set), when the batch completes. How the next
batches go is scripted with :meth:`ScriptedBatches.plan`: ``complete`` (validating, in progress,
then completed: the default), ``partial`` (every second line in the error file), ``expired``
(the first half answered, the rest expired), ``failed`` (nothing answered), ``never`` (in
progress for ever). Hostile ones, as a broken provider answers: ``lost`` (``GET
/v1/batches/{id}`` answers 404 once created), ``garbage`` (it answers 200 with a body that is
not JSON), ``broken`` (it answers 500), ``no_content`` (completed, its output file's
``/content`` answers 404), ``duplicated`` (completed, every output line twice: the second
with a failing verdict).
``GET /v1/batches`` lists the batches (newest first, pages of ``limit``, with their
``metadata``) and ``POST /v1/batches/{id}/cancel`` cancels one (``cancels`` counts them);
``create_delay_s`` holds the answer to ``POST /v1/batches`` after the batch is created (a
client killed meanwhile leaves an orphan batch).
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from typing import Any

from otel_scorers.testing.answers import Answer, RecordedRequest

__all__ = ["ScriptedBatches"]


class ScriptedBatches:
    """The batch API's state: files, batches and how the next ones go."""

    def __init__(self, answer: Callable[[RecordedRequest], tuple[Answer, bytes]]) -> None:
        self._answer = answer
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._plans: deque[str] = deque()
        #: files whose content answers 404 (``no_content``)
        self.gone_files: set[str] = set()
        #: polls a batch stays ``validating`` then ``in_progress`` before it ends
        self.polls = 2
        self._lock = threading.Lock()
        self._count = 0
        #: every call: (method, request target as sent: absolute through a proxy, headers)
        self.calls: list[tuple[str, str, dict[str, str]]] = []
        #: seconds the answer to a create waits after the batch exists
        self.create_delay_s = 0.0
        #: the batch ids cancelled, in order
        self.cancels: list[str] = []

    def plan(self, *behaviours: str) -> None:
        """How the next batches go, in order (then ``complete``)."""
        with self._lock:
            self._plans.extend(behaviours)

    def _id(self, kind: str) -> str:
        with self._lock:
            self._count += 1
            return f"{kind}-{self._count:06d}"

    def handle(self, method: str, path: str, headers: dict[str, str], raw: bytes
               ) -> tuple[int, bytes]:
        self.calls.append((method, path, headers))
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
        path = urllib.parse.urlsplit(path).path  # a proxy is sent the absolute URL
        parts = path.rstrip("/").split("/")  # ['', 'v1', 'files', ...]
        if method == "POST" and parts[2:] == ["files"]:
            return self._upload(headers.get("content-type", ""), raw)
        if method == "POST" and parts[2:] == ["batches"]:
            return self._create(json.loads(raw or b"{}"))
        if method == "GET" and parts[2:] == ["batches"]:
            return self._list(query)
        if method == "POST" and len(parts) == 5 and parts[2] == "batches" and \
                parts[4] == "cancel" and parts[3] in self.batches:
            self.cancels.append(parts[3])
            self.batches[parts[3]]["status"] = "cancelled"
            return 200, json.dumps(self._public(self.batches[parts[3]])).encode()
        if method == "GET" and len(parts) == 4 and parts[2] == "batches":
            return self._retrieve(parts[3])
        if method == "GET" and len(parts) == 5 and parts[2] == "files" and \
                parts[4] == "content" and parts[3] in self.files and \
                parts[3] not in self.gone_files:
            return 200, self.files[parts[3]]
        return 404, json.dumps({"error": {"message": f"no such object: {path}"}}).encode()

    def _upload(self, content_type: str, raw: bytes) -> tuple[int, bytes]:
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
        data: Any = None
        for part in message.iter_parts():
            if part.get_param("name", header="content-disposition") == "file":
                data = part.get_payload(decode=True)
        if not isinstance(data, bytes):
            return 400, b'{"error": {"message": "no file"}}'
        ident = self._id("file")
        self.files[ident] = data
        return 200, json.dumps({"id": ident, "object": "file", "bytes": len(data),
                                "purpose": "batch"}).encode()

    def _create(self, body: dict[str, Any]) -> tuple[int, bytes]:
        if body.get("input_file_id") not in self.files or \
                body.get("endpoint") != "/v1/chat/completions":
            return 400, b'{"error": {"message": "bad batch"}}'
        with self._lock:
            behaviour = self._plans.popleft() if self._plans else "complete"
        ident = self._id("batch")
        self.batches[ident] = {"id": ident, "object": "batch", "status": "validating",
                               "input_file_id": body["input_file_id"],
                               "created_at": int(time.time()), "behaviour": behaviour,
                               "metadata": body.get("metadata"), "polls": 0}
        if self.create_delay_s:
            time.sleep(self.create_delay_s)
        return 200, json.dumps(self._public(self.batches[ident])).encode()

    def _list(self, query: dict[str, list[str]]) -> tuple[int, bytes]:
        newest = sorted(self.batches, reverse=True)
        after = query.get("after", [""])[0]
        if after in newest:
            newest = newest[newest.index(after) + 1:]
        limit = int(query.get("limit", ["20"])[0])
        page = [self._public(self.batches[ident]) for ident in newest[:limit]]
        return 200, json.dumps({"object": "list", "data": page,
                                "last_id": page[-1]["id"] if page else None,
                                "has_more": len(newest) > limit}).encode()

    def _retrieve(self, ident: str) -> tuple[int, bytes]:
        batch = self.batches.get(ident)
        if batch is None or batch["behaviour"] == "lost":
            return 404, b'{"error": {"message": "no such batch"}}'
        if batch["behaviour"] == "garbage":
            return 200, b"<html>upstream error</html>"
        if batch["behaviour"] == "broken":
            return 500, b'{"error": {"message": "internal error"}}'
        batch["polls"] += 1
        if batch["status"] in ("validating", "in_progress"):
            if batch["behaviour"] == "never" or batch["polls"] < self.polls:
                batch["status"] = "in_progress"
            else:
                self._finish(batch)
        return 200, json.dumps(self._public(batch)).encode()

    def _finish(self, batch: dict[str, Any]) -> None:
        lines = [json.loads(line) for line in self.files[batch["input_file_id"]].splitlines()
                 if line.strip()]
        behaviour = batch["behaviour"]
        output, errors = [], []
        for index, line in enumerate(lines):
            failed = (behaviour == "partial" and index % 2 == 1) or behaviour == "failed" or (
                behaviour == "expired" and index >= len(lines) // 2)
            if failed:
                code = "batch_expired" if behaviour == "expired" else "server_error"
                errors.append({"id": f"req-{index}", "custom_id": line["custom_id"],
                               "response": None,
                               "error": {"code": code, "message": "scripted"}})
                continue
            request = RecordedRequest(path=line.get("url", "/v1/chat/completions"),
                                      headers={"batch": batch["id"]}, body=line["body"],
                                      received_at=time.monotonic())
            answer, payload = self._answer(request)
            output.append({"id": f"req-{index}", "custom_id": line["custom_id"],
                           "response": {"status_code": answer.status,
                                        "request_id": f"r-{index}",
                                        "body": json.loads(payload)}, "error": None})
            if behaviour == "duplicated":
                output.append(_failing_twin(output[-1]))
        for key, rows in (("output_file_id", output), ("error_file_id", errors)):
            if rows:
                ident = self._id("file")
                self.files[ident] = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
                batch[key] = ident
                if behaviour == "no_content":
                    self.gone_files.add(ident)
        batch["status"] = {"expired": "expired", "failed": "failed"}.get(behaviour,
                                                                         "completed")
        batch["request_counts"] = {"total": len(lines), "completed": len(output),
                                   "failed": len(errors)}

    @staticmethod
    def _public(batch: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in batch.items() if k not in ("behaviour", "polls")}


def _failing_twin(line: dict[str, Any]) -> dict[str, Any]:
    """``line`` again, its answer's every ``satisfied`` verdict turned false (a provider that
    answers one request twice, differently)."""
    text = json.dumps(line).replace('\\"satisfied\\": true', '\\"satisfied\\": false')
    twin: dict[str, Any] = json.loads(text)
    twin["id"] = line["id"] + "-again"
    return twin
