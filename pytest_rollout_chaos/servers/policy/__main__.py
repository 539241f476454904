"""Command line of the tiny policy server: load the model directory, build the app, serve on loopback.

``python -m pytest_rollout_chaos.servers.policy --model DIR --served-model-name NAME --port 0 --seed N``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from aiohttp import web

from pytest_rollout_chaos.servers import serve
from pytest_rollout_chaos.servers.policy.api import PolicyApi
from pytest_rollout_chaos.servers.policy.engine import Engine
from pytest_rollout_chaos.servers.policy.model import TinyLlama
from pytest_rollout_chaos.servers.policy.tokenization import PolicyTokenizer

ENGINE_KEY = web.AppKey("policy_engine", Engine)


def build_app(model_dir: Path, *, served_model_name: str, seed: int, max_batch: int = 64) -> web.Application:
    """The aiohttp app; the engine thread stops on app cleanup."""
    tokenizer = PolicyTokenizer(model_dir)
    model = TinyLlama.load(model_dir)
    if model.config.vocab_size < tokenizer.vocab_size:
        raise ValueError(
            f"{model_dir}: tokenizer has {tokenizer.vocab_size} tokens, model only {model.config.vocab_size}"
        )
    engine = Engine(
        model, eos_token_id=tokenizer.eos_token_id, decode=tokenizer.decode, max_batch=max_batch, seed=seed
    )
    app = web.Application()
    app[ENGINE_KEY] = engine
    app.add_routes(
        PolicyApi(engine, tokenizer, served_model_name=served_model_name, root=str(model_dir)).routes()
    )

    async def stop_engine(app: web.Application) -> None:
        app[ENGINE_KEY].close()

    app.on_cleanup.append(stop_engine)
    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_rollout_chaos.servers.policy", description=__doc__
    )
    parser.add_argument("--model", type=Path, required=True, help="HF-layout model directory")
    parser.add_argument("--served-model-name", default="tiny-llama")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args(argv)
    if not (args.model / "config.json").is_file():
        parser.error(
            f"--model {str(args.model)!r}: no config.json there (valid: an HF-layout model directory)"
        )
    started = time.monotonic()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    app = build_app(
        args.model, served_model_name=args.served_model_name, seed=args.seed, max_batch=args.max_batch
    )
    print(f"model {args.model} loaded in {time.monotonic() - started:.2f}s", flush=True)
    serve.serve(app, host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
