"""A stand-in for vLLM's OpenAI server on loopback, in both launch shapes.

As the ``vllm`` console script: ``vllm serve MODEL --host H --port P ...`` (and ``vllm
--version``); as the module entry point: ``python -m vllm.entrypoints.openai.api_server --model
MODEL --host H --port P ...`` (a stub ``vllm`` package runs this file). It records its argv to
``$FAKE_VLLM_ARGV_FILE`` and behaves per ``$FAKE_VLLM_MODE``:
``ok`` (health 200, one-token completions work), ``no_generation`` (health 200, completions
500: an engine that looks alive but cannot generate), ``exit_zero`` (serves, then exits 0
after ``$FAKE_VLLM_EXIT_AFTER_S`` seconds, as vLLM does when its engine core dies).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MODE = os.environ.get("FAKE_VLLM_MODE", "ok")


class Handler(BaseHTTPRequestHandler):
    def _reply(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._reply(200, {})
        else:
            self._reply(
                404, {"error": {"message": "not found", "type": "NotFoundError", "param": None, "code": 404}}
            )

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/v1/completions" and MODE != "no_generation":
            self._reply(200, {"object": "text_completion", "choices": [{"index": 0, "text": "x"}]})
        else:
            self._reply(
                500, {"error": {"message": "engine dead", "type": "InternalServerError", "code": 500}}
            )

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> int:
    if sys.argv[1:] == ["--version"]:
        print("0.0.0+fake")
        return 0
    Path(os.environ["FAKE_VLLM_ARGV_FILE"]).write_text(json.dumps(sys.argv[1:]))
    parser = argparse.ArgumentParser()
    if sys.argv[1:2] == ["serve"]:
        parser.add_argument("command", choices=["serve"])
        parser.add_argument("model")
    else:
        parser.add_argument("--model", required=True)
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    args, _ = parser.parse_known_args()
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    if MODE == "exit_zero":
        threading.Timer(float(os.environ.get("FAKE_VLLM_EXIT_AFTER_S", "1")), lambda: os._exit(0)).start()
    print(f"fake vllm serving {args.model} on {args.host}:{args.port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
