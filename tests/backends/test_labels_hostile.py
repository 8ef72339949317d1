"""Reviewers' labels read from a hostile or broken Phoenix and MLflow (issue 35.9), scripted on
127.0.0.1: a cursor that never ends stops at the page bound, one unreadable trace (spans that do
not parse, JSON nested past the recursion limit, an error answer) is one note and the other
traces' labels are still cases, two reviewers on one run are two cases, and an unreachable
backend is one line, never a traceback. And a large answer (a trace with many assessments) is
read whole when a result is written (issue 35.8)."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from otel_scorers.backends.labels import reviewed_cases
from otel_scorers.backends.mlflow import MLflowSettings
from otel_scorers.backends.phoenix import MAX_PAGES, PhoenixSettings
from otel_scorers.errors import ConfigError
from tests.support import free_port

Route = Callable[[str, dict[str, list[str]], Any], tuple[int, bytes]]


@pytest.fixture
def scripted() -> Iterator[tuple[str, list[Route], list[str]]]:
    """A server answering each request with the first route that answers (not ``None``);
    the paths asked are recorded."""
    routes: list[Route] = []
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            url = urlsplit(self.path)
            asked.append(url.path)
            for route in routes:
                found = route(url.path, parse_qs(url.query), body)
                if found is not None:
                    status, data = found
                    break
            else:
                status, data = 404, b"{}"
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", routes, asked
    finally:
        server.shutdown()
        server.server_close()


def ok(value: Any) -> tuple[int, bytes]:
    return 200, json.dumps(value).encode()


def otlp_span(trace: str, span: str, prompt: str, answer: str) -> dict[str, Any]:
    attributes = [{"key": key, "value": {"stringValue": value}} for key, value in (
        ("gen_ai.operation.name", "invoke_agent"), ("gen_ai.agent.name", "support-bot"),
        ("gen_ai.input.messages", json.dumps([{"role": "user", "parts": [
            {"type": "text", "content": prompt}]}])),
        ("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": [
            {"type": "text", "content": answer}]}])))]
    return {"trace_id": base64.b64encode(bytes.fromhex(trace)).decode(),
            "span_id": base64.b64encode(bytes.fromhex(span)).decode(),
            "name": "invoke_agent support-bot",
            "start_time_unix_nano": "1", "end_time_unix_nano": "2", "attributes": attributes}


def review(trace: str, ident: str, value: str, reviewer: str) -> dict[str, Any]:
    return {"assessment_id": ident, "assessment_name": "rubric", "trace_id": trace,
            "feedback": {"value": value},
            "source": {"source_type": "HUMAN", "source_id": reviewer}}


def ours(trace: str) -> dict[str, Any]:
    return {"assessment_id": f"a-{trace}-ours", "assessment_name": "rubric",
            "trace_id": trace, "feedback": {"value": 1.0},
            "source": {"source_type": "LLM_JUDGE", "source_id": "otel-scorers"},
            "metadata": {"criteria": json.dumps([{"description": "greets the user"}])}}


def test_mlflow_one_bad_trace_is_one_note_and_every_reviewer_counts(
        scripted: tuple[str, list[Route], list[str]]) -> None:
    base, routes, _ = scripted
    good, also_good = "a" * 32, "b" * 32
    traces = [
        {"trace_id": "tr-x1", "assessments": 5},  # not a list: no review to read
        {"trace_id": "tr-x2", "assessments": [{"source": "HUMAN", "feedback": {}}]},
        {"trace_id": "tr-unparsed", "assessments": [review("tr-unparsed", "r0", "pass", "a")]},
        {"trace_id": "tr-deep", "assessments": [review("tr-deep", "r1", "pass", "a")]},
        {"trace_id": "tr-gone", "assessments": [review("tr-gone", "r2", "pass", "a")]},
        {"trace_id": f"tr-{good}", "assessments": [
            ours(good), review(f"tr-{good}", "r3", "fail", "first@example.com"),
            review(f"tr-{good}", "r4", "fail", "second@example.com")]},
        {"trace_id": f"tr-{also_good}", "assessments": [
            ours(also_good), review(f"tr-{also_good}", "r5", "pass", "first@example.com")]}]
    spans = {"tr-unparsed": {"trace": {"spans": [{"trace_id": 12, "span_id": [1]}]}},
             f"tr-{good}": {"trace": {"spans": [otlp_span(good, "1" * 16, "Hi?", "No.")]}},
             f"tr-{also_good}": {"trace": {"spans": [
                 otlp_span(also_good, "2" * 16, "Hello?", "Hello! Yes.")]}}}

    def route(path: str, query: dict[str, list[str]], body: Any) -> tuple[int, bytes] | None:
        if path == "/api/3.0/mlflow/traces/search":
            return ok({"traces": traces})
        if path == "/api/3.0/mlflow/traces/get":
            trace = query["trace_id"][0]
            if trace == "tr-deep":
                return 200, b"[" * 100_000
            if trace == "tr-gone":
                return 500, b"{}"
            return ok(spans[trace])
        return None

    routes.append(route)
    block = MLflowSettings(tracking_uri=base, experiment="1")
    cases, notes = reviewed_cases("mlflow", block, 100)
    assert sorted(case.expected.label for case in cases) == ["fail", "fail", "pass"]
    assert len({case.id for case in cases}) == 3  # two reviewers of one run: two cases
    assert sorted(notes) == ["1 x a trace could not be read (ParseError)",
                             "1 x a trace could not be read (http_500)",
                             "1 x a trace could not be read (invalid_response)"]


def test_phoenix_a_cursor_that_never_ends_stops_at_the_page_bound(
        scripted: tuple[str, list[Route], list[str]]) -> None:
    base, routes, asked = scripted
    pages = iter(range(10**9))

    def route(path: str, query: dict[str, list[str]], body: Any) -> tuple[int, bytes] | None:
        if path.endswith("/spans"):  # one span that cannot be read, and always a new cursor
            return ok({"data": [{"context": {"trace_id": 5}}],
                       "next_cursor": f"c{next(pages)}"})
        if path.endswith("/span_annotations"):
            return ok({"data": []})
        return None

    routes.append(route)
    with pytest.raises(ConfigError, match="no human label in Phoenix makes a case"):
        reviewed_cases("phoenix", PhoenixSettings(endpoint=base), 10**6)
    assert sum(path.endswith("/spans") for path in asked) == MAX_PAGES


def test_phoenix_two_reviewers_of_one_span_and_garbage_beside_them(
        scripted: tuple[str, list[Route], list[str]]) -> None:
    base, routes, _ = scripted
    trace, span = "c" * 32, "3" * 16
    spans = [{"context": {"trace_id": trace, "span_id": span}, "name": "invoke_agent bot",
              "attributes": {"gen_ai.operation.name": "invoke_agent",
                             "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [
                                 {"type": "text", "content": "Hi?"}]}]),
                             "gen_ai.output.messages": json.dumps([{
                                 "role": "assistant", "parts": [
                                     {"type": "text", "content": "No."}]}])}},
             {"context": {"trace_id": trace, "span_id": "4" * 16}, "attributes": [1, 2]},
             {"context": "nothing"}, "not a span"]
    annotations = [
        {"id": "ours", "span_id": span, "name": "rubric", "identifier": "otel-scorers",
         "annotator_kind": "LLM", "result": {"score": 1.0},
         "metadata": {"criteria": [{"description": "greets the user"}]}},
        {"id": "h1", "span_id": span, "name": "rubric", "annotator_kind": "HUMAN",
         "identifier": "reviewer-1", "result": {"label": "fail"}},
        {"id": "h2", "span_id": span, "name": "rubric", "annotator_kind": "HUMAN",
         "identifier": "reviewer-2", "result": {"label": "fail"}},
        {"id": "h3", "span_id": "4" * 16, "name": "rubric", "annotator_kind": "HUMAN",
         "result": "garbage"}]

    def route(path: str, query: dict[str, list[str]], body: Any) -> tuple[int, bytes] | None:
        if path.endswith("/spans"):
            return ok({"data": spans})
        if path.endswith("/span_annotations"):
            return ok({"data": annotations})
        return None

    routes.append(route)
    cases, notes = reviewed_cases("phoenix", PhoenixSettings(endpoint=base), 100)
    assert [case.expected.label for case in cases] == ["fail", "fail"]
    assert len({case.id for case in cases}) == 2
    assert notes == ["1 human annotation(s) left out: no run could be read from the span"]


def test_an_unreachable_backend_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"MLflow at http://127\.0\.0\.1:\d+ unreachable"):
        reviewed_cases("mlflow", MLflowSettings(
            tracking_uri=f"http://127.0.0.1:{free_port()}", experiment="1"), 10)


def test_an_mlflow_answer_past_64_kb_is_read_whole_and_the_result_written(
        scripted: tuple[str, list[Route], list[str]]) -> None:
    """A trace with many assessments answers hundreds of KB (issue 35.8: it used to be cut at
    64 KB, fail to decode, and the result was dropped)."""
    from otel_scorers.backends import Evaluated, MLflowSink, SinkQueue
    from otel_scorers.background_loop import submit
    from otel_scorers.scorers.result import ScoreResult

    base, routes, _ = scripted
    trace = "d" * 32
    others = [{"assessment_id": f"a-{i}", "assessment_name": f"human-{i}",
               "source": {"source_type": "HUMAN", "source_id": "x"},
               "rationale": "y" * 1_000} for i in range(300)]
    posted: list[Any] = []

    def route(path: str, query: dict[str, list[str]], body: Any) -> tuple[int, bytes] | None:
        if path == f"/api/3.0/mlflow/traces/tr-{trace}":
            return ok({"trace": {"trace_info": {"assessments": others}}})
        if path == f"/api/3.0/mlflow/traces/tr-{trace}/assessments":
            posted.append(body)
            return ok({"assessment": {"assessment_id": "new"}})
        return None

    routes.append(route)
    queue = SinkQueue([MLflowSink(base, experiment="1")], retry_s=1)

    async def offer() -> None:
        queue.offer(Evaluated(trace, "5" * 16, ScoreResult(run_id="r", scorer="rubric",
                                                           score=1.0, label="pass")))
    submit(offer()).result(10)
    assert queue.flush(20)
    assert queue.totals()["mlflow"] == {"written": 1, "waiting": 0}
    assert len(posted) == 1 and posted[0]["assessment"]["assessment_name"] == "rubric"
    queue.close(1)
