"""A plain OpenAI-compatible policy server, as someone else would run it: it imports nothing of
pytest_rollout_chaos (only the standard library and ``tokenizers``).

``python plain_openai_server.py --tokenizer TOKENIZER_JSON --model NAME [--mode ok|unready]``
binds a free loopback port, prints ``LISTENING <port>`` and serves until SIGTERM or SIGINT:

- ``GET /health`` 200 (``--mode unready``: 503 forever, as vLLM answers while its engine loads);
- ``GET /v1/models``: one model, ``NAME``;
- ``POST /v1/chat/completions`` and ``POST /v1/completions``: one fixed assistant answer, with
  per-token ``logprobs`` and ``token_id:N`` tokens under ``return_tokens_as_token_ids``, and
  ``prompt_token_ids``/``token_ids`` under ``return_token_ids``, as vLLM does;
- ``POST /tokenize``: a ChatML rendering of ``messages`` (or ``prompt``) as token ids.

Real ids come from the tokenizer file; a request naming another model gets vLLM's 404. Every
request is counted; ``GET /stats`` answers the counts per path.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tokenizers import Tokenizer

ANSWER = "The answer is 42."
LOGPROB = -0.25
END_OF_TURN = "<|im_end|>"


class Policy:
    """What the handler needs: the tokenizer, the served name, the mode and the counts."""

    def __init__(self, tokenizer: Tokenizer, model: str, mode: str) -> None:
        self.tokenizer = tokenizer
        self.model = model
        self.mode = mode
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()
        end = tokenizer.token_to_id(END_OF_TURN)
        if end is None:
            raise SystemExit(f"the tokenizer has no {END_OF_TURN!r} token")
        self.answer_ids = [*tokenizer.encode(ANSWER, add_special_tokens=False).ids, end]

    def render(self, messages: list[dict[str, Any]], *, generation_prompt: bool) -> list[int]:
        text = "".join(
            f"<|im_start|>{message.get('role', 'user')}\n{message.get('content') or ''}{END_OF_TURN}\n"
            for message in messages
        )
        if generation_prompt:
            text += "<|im_start|>assistant\n"
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def tokens(self, ids: list[int], as_ids: bool) -> list[str]:
        return [f"token_id:{i}" if as_ids else (self.tokenizer.id_to_token(i) or "") for i in ids]


class Handler(BaseHTTPRequestHandler):
    policy: Policy  # set on the subclass main() builds
    protocol_version = "HTTP/1.1"

    def _reply(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._reply(
            status, {"object": "error", "message": message, "type": "BadRequestError", "code": status}
        )

    def _count(self) -> None:
        with self.policy.lock:
            self.policy.counts[self.path] += 1

    def do_GET(self) -> None:
        self._count()
        if self.path == "/health":
            if self.policy.mode == "unready":
                self._error(503, "the engine is still loading")
            else:
                self._reply(200, {})
        elif self.path == "/v1/models":
            card = {"id": self.policy.model, "object": "model", "created": int(time.time()), "owned_by": "me"}
            self._reply(200, {"object": "list", "data": [card]})
        elif self.path == "/stats":
            with self.policy.lock:
                self._reply(200, dict(self.policy.counts))
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        self._count()
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        except ValueError:
            self._error(400, "the body is not JSON")
            return
        if body.get("model") not in (None, self.policy.model):
            self._error(404, f"The model `{body.get('model')}` does not exist.")
            return
        if self.path == "/tokenize":
            self._tokenize(body)
        elif self.path == "/v1/chat/completions":
            self._chat(body)
        elif self.path == "/v1/completions":
            self._completion(body)
        else:
            self._error(404, f"no route {self.path}")

    def _tokenize(self, body: dict[str, Any]) -> None:
        if isinstance(body.get("messages"), list):
            ids = self.policy.render(
                body["messages"], generation_prompt=body.get("add_generation_prompt", True)
            )
        elif isinstance(body.get("prompt"), str):
            ids = list(self.policy.tokenizer.encode(body["prompt"], add_special_tokens=False).ids)
        else:
            self._error(400, "expected 'messages' or 'prompt'")
            return
        self._reply(200, {"count": len(ids), "max_model_len": 1024, "tokens": ids, "token_strs": None})

    def _chat(self, body: dict[str, Any]) -> None:
        prompt_ids = self.policy.render(body.get("messages") or [], generation_prompt=True)
        ids = self.policy.answer_ids
        as_ids = bool(body.get("return_tokens_as_token_ids"))
        logprobs: dict[str, Any] | None = None
        if body.get("logprobs"):
            content: list[dict[str, Any]] = [
                {"token": token, "logprob": LOGPROB, "bytes": None, "top_logprobs": []}
                for token in self.policy.tokens(ids, as_ids)
            ]
            logprobs = {"content": content}
        message: dict[str, Any] = {
            "role": "assistant",
            "content": ANSWER,
            "tool_calls": [],
            "reasoning_content": None,
        }
        choice: dict[str, Any] = {
            "index": 0,
            "message": message,
            "logprobs": logprobs,
            "finish_reason": "stop",
        }
        response: dict[str, Any] = {
            "id": f"chatcmpl-{time.monotonic_ns()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.policy.model,
            "choices": [choice],
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(ids)},
        }
        if body.get("return_token_ids"):
            choice["token_ids"] = ids
            response["prompt_token_ids"] = prompt_ids
        self._reply(200, response)

    def _completion(self, body: dict[str, Any]) -> None:
        ids = self.policy.answer_ids
        tokens = self.policy.tokens(ids, bool(body.get("return_tokens_as_token_ids")))
        logprobs: dict[str, Any] | None = None
        if body.get("logprobs") is not None:
            offsets = list(range(len(ids)))
            logprobs = {"tokens": tokens, "token_logprobs": [LOGPROB] * len(ids), "text_offset": offsets}
        choice: dict[str, Any] = {"index": 0, "text": ANSWER, "logprobs": logprobs, "finish_reason": "stop"}
        if body.get("return_token_ids"):
            choice["token_ids"] = ids
        self._reply(
            200,
            {"id": "cmpl-1", "object": "text_completion", "model": self.policy.model, "choices": [choice]},
        )

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", required=True, help="a tokenizer.json")
    parser.add_argument("--model", required=True, help="the served model name")
    parser.add_argument("--mode", choices=("ok", "unready"), default="ok")
    args = parser.parse_args()
    handler = type(
        "BoundHandler",
        (Handler,),
        {"policy": Policy(Tokenizer.from_file(args.tokenizer), args.model, args.mode)},
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True

    def stop(signum: int, frame: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"LISTENING {server.server_address[1]}", flush=True)
    server.serve_forever(poll_interval=0.1)
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
