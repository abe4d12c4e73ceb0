"""The simulator's HTTP surface: SGLang's endpoints on Starlette, served by uvicorn."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from console.sim import loads as sim_loads
from console.sim.dispatch import meta_dp_rank
from console.sim.engine import Chunk, Engine, SimRequest
from console.sim.prefix import NO_KEYS, PrefixKeys, id_keys, text_keys
from console.sim.state import SimState, Status
from console.sim.text import count_tokens, dumps
from console.sim.tokenizer import preload

log = logging.getLogger("sglang.sim")
# Always open, by prefix (sglang 0.5.23 srt/utils/auth.py:101-105).
OPEN_PREFIXES = ("/health", "/ready", "/metrics")
# The simulator's ADMIN_OPTIONAL routes (srt/entrypoints/http_server.py:1025-1026).
ADMIN_OPTIONAL_PATHS = frozenset({"/flush_cache"})
WARMUP_RID = "sim-warmup"


def auth_allows(
    path: str, method: str, header: str, api_key: str | None, admin_key: str | None
) -> bool:
    """SGLang's `decide_request_auth` for the simulator's routes (srt/utils/auth.py:90-151):
    probes are open; an ADMIN_OPTIONAL route takes only the admin key when one is set, else
    the API key, else anyone; every other route takes the API key when one is set."""
    if method == "OPTIONS" or path.startswith(OPEN_PREFIXES):
        return True
    if path in ADMIN_OPTIONAL_PATHS and admin_key:
        expected: str | None = admin_key
    else:
        expected = api_key
    if not expected:
        return True
    scheme, _, token = header.partition(" ")
    return scheme.lower() == "bearer" and secrets.compare_digest(token, expected)


class ApiKeyMiddleware:
    """`--api-key` and `--admin-api-key` as SGLang's middleware applies them."""

    def __init__(self, app: ASGIApp, state: SimState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The earliest moment the server knows of a request (ground truth for TTFT).
        scope["sim_received"] = self.state.clock.now()
        state = self.state
        if scope["type"] != "http" or not (state.api_key or state.admin_api_key):
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        if auth_allows(scope["path"], scope["method"], header, state.api_key, state.admin_api_key):
            await self.app(scope, receive, send)
            return
        await JSONResponse({"error": "Unauthorized"}, status_code=401)(scope, receive, send)


def build_app(state: SimState, on_fault: Callable[[str], Awaitable[None]]) -> ASGIApp:
    handlers = Handlers(state, on_fault)
    routes = [
        Route("/ready", handlers.ready, methods=["GET"]),
        Route("/health", handlers.health, methods=["GET"]),
        Route("/health_generate", handlers.health, methods=["GET"]),
        Route("/model_info", handlers.model_info, methods=["GET"]),
        Route("/get_model_info", handlers.get_model_info, methods=["GET"]),
        Route("/server_info", handlers.server_info, methods=["GET"]),
        Route("/get_server_info", handlers.get_server_info, methods=["GET"]),
        Route("/v1/models", handlers.models, methods=["GET"]),
        Route("/v1/loads", handlers.loads, methods=["GET"]),
        Route("/generate", handlers.generate, methods=["POST", "PUT"]),
        Route("/v1/completions", handlers.completions, methods=["POST"]),
        Route("/v1/chat/completions", handlers.chat, methods=["POST"]),
        Route("/flush_cache", handlers.flush_cache, methods=["GET", "POST"]),
        Route("/sim/stats", handlers.sim_stats, methods=["GET"]),
    ]
    if state.options.get("enable_metrics"):
        # Without --enable-metrics there is no /metrics route at all: a 404
        # (sglang 0.5.23 srt/entrypoints/http_server.py:313-316, srt/utils/common.py:2843-2853).
        routes.append(Route("/metrics", handlers.metrics, methods=["GET"]))
    app = Starlette(routes=routes, exception_handlers={404: _not_found})
    return ApiKeyMiddleware(app, state)


async def _not_found(request: Request, exc: Exception) -> Response:
    """FastAPI's 404 body, as a real SGLang server answers an unknown path."""
    return JSONResponse({"detail": "Not Found"}, status_code=404)


def _error(status: int, message: str, kind: str = "BadRequestError") -> JSONResponse:
    return JSONResponse(
        {"object": "error", "message": message, "type": kind, "param": None, "code": status},
        status_code=status,
    )


class Handlers:
    def __init__(self, state: SimState, on_fault: Callable[[str], Awaitable[None]]) -> None:
        self.state = state
        self.on_fault = on_fault
        preload(state.model.model_type)  # the prompt counter's vocabulary, off the event loop

    # -- health and info ---------------------------------------------------------------------

    async def ready(self, request: Request) -> Response:
        return Response(status_code=200 if self.state.ready else 503)

    async def health(self, request: Request) -> Response:
        state = self.state
        if state.status is not Status.UP:
            return Response(status_code=503)
        probe = state.new_request(
            input_len=1,
            max_new=1,
            ignore_eos=True,
            streaming=False,
            rid=f"HEALTH_CHECK_{time.time_ns()}",
            log_metrics=False,
        )
        state.submit(probe)
        # SGLang polls once a second until any scheduler output arrives.
        await state.clock.sleep(1.0)
        return Response(status_code=200 if probe.first_token_at is not None else 503)

    def _model_info(self) -> dict[str, Any]:
        state = self.state
        model_path = str(state.options.get("model_path"))
        return {
            "model_path": model_path,
            "served_model_name": state.served_name,
            "tokenizer_path": model_path,
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": "default",
            "load_format": "auto",
            "reasoning_parser": state.reasoning_parser,
            "tool_call_parser": None,
            "disaggregation_mode": "null",
            # sglang 0.5.23 srt/entrypoints/http_server.py:837 and srt/configs/model_config.py
            # :674-676, 819-844: a multimodal arch with a vision tower, not --language-model-only.
            "has_image_understanding": state.model.image_understanding
            and not state.options.get("language_model_only"),
            "has_audio_understanding": False,
            "model_type": state.model.model_type,
            "architectures": [state.model.hf_architecture],
        }

    async def model_info(self, request: Request) -> Response:
        return JSONResponse(self._model_info())

    async def loads(self, request: Request) -> Response:
        """Per-DP-rank load (srt/entrypoints/v1_loads.py:96-147): smg's load monitor asks."""
        params = request.query_params
        rank_text = params.get("dp_rank")
        try:
            dp_rank = None if rank_text is None else int(rank_text)
        except ValueError:
            # FastAPI's validation of `dp_rank: Optional[int]`, turned into a 400
            # ErrorResponse by SGLang's handler (srt/entrypoints/http_server.py:635-693).
            return _error(
                400,
                f"1 validation error: dp_rank: Input should be a valid integer "
                f"(input: {rank_text!r})",
                kind="Bad Request",
            )
        try:
            data = sim_loads.loads(self.state, params.get("include"), dp_rank)
        except sim_loads.LoadsError:
            # An unhandled ValueError: Starlette's plain 500 (see sim_loads.LoadsError).
            return PlainTextResponse("Internal Server Error", status_code=500)
        if params.get("format") == "prometheus":
            return PlainTextResponse(
                sim_loads.prometheus_text(data),
                media_type="text/plain; version=0.0.4; charset=utf-8",
            )
        return JSONResponse(data)

    async def get_model_info(self, request: Request) -> Response:
        log.warning(
            "Endpoint '/get_model_info' is deprecated and will be removed in a future "
            "version. Please use '/model_info' instead."
        )
        return JSONResponse(self._model_info())

    async def server_info(self, request: Request) -> Response:
        return Response(
            json.dumps(self.state.server_info(), default=str), media_type="application/json"
        )

    async def get_server_info(self, request: Request) -> Response:
        log.warning(
            "Endpoint '/get_server_info' is deprecated and will be removed in a future "
            "version. Please use '/server_info' instead."
        )
        return await self.server_info(request)

    async def models(self, request: Request) -> Response:
        state = self.state
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": state.served_name,
                        "object": "model",
                        "created": int(state.startup_time),
                        "owned_by": "sglang",
                        "root": state.served_name,
                        "parent": None,
                        "max_model_len": state.model.context_len,
                    }
                ],
            }
        )

    async def metrics(self, request: Request) -> Response:
        state = self.state
        if state.options.fault("metrics-500"):
            return PlainTextResponse("Internal Server Error", status_code=500)
        if state.options.fault("bad-metrics"):
            return PlainTextResponse(
                'sglang:gen_throughput{model_name="x" 12\n'
                "<html><body>upstream error</body></html>\n"
            )
        now = state.clock.now()
        for engine in state.engines:
            if engine.idle:
                state.stats.on_idle(engine.rank, now)
        text = state.stats.render()
        if state.options.fault("metrics-nan"):
            text = _poison(text)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    async def sim_stats(self, request: Request) -> Response:
        """Ground truth for tests (not an SGLang endpoint)."""
        state = self.state
        stats = state.stats
        return JSONResponse(
            {
                "sim_time_s": state.clock.now(),
                "speed": state.options.speed,
                "decode_tokens_total": stats.truth_decode_tokens,
                "request_verify_steps_total": stats.truth_request_steps,
                "steps_total": stats.truth_steps,
                "running": sum(len(e.running) for e in state.engines),
                "queued": sum(len(e.waiting) for e in state.engines),
                "busy_sim_s": [e.busy_sim_s for e in state.engines],
                "decoding": {
                    "algorithm": state.decode.algorithm,
                    "verify_width": state.decode.verify_width,
                    "accept_mean": state.decode.accept_mean,
                    "step_s": state.decode.step_s,
                    "batch_alpha": state.decode.batch_alpha,
                },
                "requests": [record.to_json() for record in stats.records],
            }
        )

    async def flush_cache(self, request: Request) -> Response:
        state = self.state
        try:
            timeout = float(request.query_params.get("timeout", "0") or 0)
        except ValueError:
            return _error(400, "timeout must be a number")
        # A flush waits up to `timeout` real seconds for the scheduler to go idle
        # (sglang 0.5.23 srt/managers/scheduler_components/flush_wrapper.py:22-60).
        deadline = time.monotonic() + timeout
        while timeout > 0 and not state.idle and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if not state.idle:
            if timeout > 0:
                log.warning(
                    "Deferred flush_cache timed out while waiting for idle state.",
                    extra={"scheduler": True},
                )
                return PlainTextResponse("Timed out waiting for idle state.", status_code=400)
            log.warning(
                "Cache not flushed because there are pending requests. #queue-req: %d, "
                "#running-req: %d",
                sum(len(e.waiting) for e in state.engines),
                sum(len(e.running) for e in state.engines),
                extra={"scheduler": True},
            )
            # The scheduler's refusal has no message: the route's default
            # (srt/entrypoints/http_server.py:1029-1040, srt/managers/scheduler.py:5518-5546).
            return PlainTextResponse("Flush cache failed.\n", status_code=400)
        state.stats.flush()
        for engine in state.engines:
            engine.cache.clear()  # tree_cache.reset() (srt/managers/scheduler.py:5518-5524)
        log.info("Cache flushed successfully!")
        return PlainTextResponse(
            "Cache flushed.\nPlease check backend logs for more details. (When there are running "
            "or waiting requests, the operation will not be performed.)\n"
        )

    # -- generation --------------------------------------------------------------------------

    @property
    def _cache_report(self) -> bool:
        return bool(self.state.options.get("enable_cache_report"))

    def _keys(
        self, *, ids: list[int] | None = None, text: str | None = None, input_len: int = 0
    ) -> PrefixKeys:
        """The prompt's prefix-cache keys (none with `--disable-radix-cache`)."""
        if self.state.options.get("disable_radix_cache"):
            return NO_KEYS
        if ids is not None:
            return id_keys(ids)
        return text_keys(text or "", input_len)

    async def _body(self, request: Request) -> dict[str, Any] | Response:
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            return _error(400, "request body is not valid JSON")
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object")
        return body

    async def _admit_check(self) -> Response | None:
        state = self.state
        if state.status is Status.DRAINING:
            return _error(503, "The server is shutting down", "ServiceUnavailableError")
        fault = state.options.fault("http-500")
        if fault and state.rng.random() < fault.number(0.1):
            return _error(500, "Internal server error (simulated fault)", "InternalServerError")
        return None

    async def generate(self, request: Request) -> Response:
        received = request.scope.get("sim_received", self.state.clock.now())
        body = await self._body(request)
        if isinstance(body, Response):
            return body
        refused = await self._admit_check()
        if refused:
            return refused
        params = body.get("sampling_params") or {}
        if not isinstance(params, dict):
            return _error(400, "sampling_params must be an object")
        if "input_ids" in body and body["input_ids"] is not None:
            ids = body["input_ids"]
            if not isinstance(ids, list) or (ids and isinstance(ids[0], list)):
                return _error(400, "batched input_ids are not supported by the simulator")
            input_len = len(ids)
            prefix = self._keys(ids=ids)
        elif isinstance(body.get("text"), str):
            input_len = count_tokens(body["text"], self.state.model.model_type)
            prefix = self._keys(text=body["text"], input_len=input_len)
        elif isinstance(body.get("text"), list):
            return _error(400, "batched text is not supported by the simulator")
        else:
            return _error(400, "Either text or input_ids should be provided.")
        try:
            max_new = int(params.get("max_new_tokens", 128))
        except (TypeError, ValueError):
            return _error(400, "max_new_tokens must be an integer")
        stream = bool(body.get("stream", False))
        sim_request = self.state.new_request(
            input_len=input_len,
            max_new=max_new,
            ignore_eos=bool(params.get("ignore_eos")),
            streaming=stream,
            rid=body.get("rid"),
            arrival=received,
            priority=body.get("priority"),
            prefix=prefix,
        )
        engine = self.state.submit(sim_request)
        if not stream:
            await _wait_done(sim_request)
            if sim_request.aborted or not sim_request.chunks:
                return _error(500, "request aborted")
            return Response(
                self._native_event(sim_request, sim_request.chunks[-1], True),
                media_type="application/json",
            )
        return StreamingResponse(
            self._native_stream(sim_request, engine), media_type="text/event-stream"
        )

    async def _native_stream(self, sim_request: SimRequest, engine: Engine) -> AsyncIterator[str]:
        try:
            async for chunks, last in _chunks(sim_request):
                await self._maybe_crash(sim_request)
                self._mark_sent(sim_request)
                parts = [
                    "data: "
                    + self._native_event(sim_request, chunk, last and i == len(chunks) - 1)
                    + "\n\n"
                    for i, chunk in enumerate(chunks)
                ]
                yield "".join(parts)
            yield "data: [DONE]\n\n"
        finally:
            engine.abort(sim_request)

    def _native_event(self, req: SimRequest, chunk: Chunk, final: bool) -> str:
        state = self.state
        count = chunk.completion_tokens
        text = req.tokens.text_upto(count)
        ids = req.tokens.ids_upto(count)
        finish = dumps(req.finish_reason) if final and req.finish_reason else "null"
        meta = (
            f'"id":"{req.rid}","finish_reason":{finish},"prompt_tokens":{req.input_len},'
            f'"weight_version":"default","num_retractions":0,"reasoning_tokens":0,'
            f'"completion_tokens":{chunk.completion_tokens},"cached_tokens":{req.cached_tokens},'
            f'"cached_tokens_details":{_cache_details(req.cached_tokens)}'
        ) + meta_dp_rank(req.dp_rank, state.dp)
        if final:
            e2e = (req.finished_at or state.clock.now()) - req.arrival
            meta += f',"e2e_latency":{e2e!r}'
            if state.decode.speculative and req.verify_ct:
                meta += "," + dumps(self._spec_details(req))[1:-1]
            if state.options.get("enable_metrics"):
                first = (req.first_token_at or req.arrival) - req.arrival
                meta += (
                    f',"queue_time":{((req.admitted_at or req.arrival) - req.arrival)!r},'
                    f'"first_token_latency":{first!r}'
                )
        return f'{{"text":"{text}","output_ids":[{ids}],"meta_info":{{{meta}}}}}'

    def _spec_details(self, req: SimRequest) -> dict[str, Any]:
        """A finished request's speculative figures in its final `meta_info`, keys in
        SGLang's order (sglang 0.5.23 srt/managers/tokenizer_manager.py:3149-3201); the
        histogram only when it has a step (3194-3201)."""
        proposed = req.verify_ct * max(1, self.state.decode.num_draft_tokens - 1)
        details: dict[str, Any] = {
            "spec_accept_rate": req.correct_drafts / proposed if proposed else 0.0,
            "spec_accept_length": req.generated / req.verify_ct,
            "spec_num_correct_drafts": req.correct_drafts,
            "spec_num_proposed_drafts": proposed,
            "spec_verify_ct": req.verify_ct,
        }
        if req.correct_drafts_histogram:
            details["spec_correct_drafts_histogram"] = list(req.correct_drafts_histogram)
        return details

    def _sglext_spec_details(self, req: SimRequest) -> dict[str, Any]:
        """`sglext.spec_tokens_details` on the OpenAI API: every `SpecTokensDetails` field,
        defaults where meta_info has none (sglang 0.5.23 srt/entrypoints/openai/protocol.py:
        456-467, utils.py:310-341)."""
        meta = self._spec_details(req)
        return {
            "spec_accept_rate": meta["spec_accept_rate"],
            "spec_accept_length": meta["spec_accept_length"],
            "spec_cap_length": 0.0,
            "spec_block_accept_length": 0.0,
            "spec_num_correct_drafts": meta["spec_num_correct_drafts"],
            "spec_num_proposed_drafts": meta["spec_num_proposed_drafts"],
            "spec_verify_ct": meta["spec_verify_ct"],
            "spec_correct_drafts_histogram": meta.get("spec_correct_drafts_histogram", []),
            "spec_cap_lens_histogram": [],
        }

    def _mark_sent(self, req: SimRequest) -> None:
        if req.first_sent_at is None:
            req.first_sent_at = self.state.clock.now()
            if req.record is not None:
                req.record.first_sent = req.first_sent_at

    async def _maybe_crash(self, req: SimRequest) -> None:
        fault = self.state.options.fault("crash-mid-stream")
        if fault and req.generated >= fault.number(32) and not req.rid.startswith(WARMUP_RID):
            await self.on_fault("crash-mid-stream")

    async def _openai(self, request: Request, chat: bool) -> Response:
        received = request.scope.get("sim_received", self.state.clock.now())
        body = await self._body(request)
        if isinstance(body, Response):
            return body
        refused = await self._admit_check()
        if refused:
            return refused
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                return _error(400, "messages must be a non-empty list")
            input_len = 10 + sum(
                count_tokens(str(m.get("content", "")), self.state.model.model_type)
                for m in messages
                if isinstance(m, dict)
            )
            # The chat template renders each message after its role: the cache sees that.
            rendered = "".join(
                f"<{m.get('role')}>{m.get('content', '')}" for m in messages if isinstance(m, dict)
            )
            prefix = self._keys(text=rendered, input_len=input_len)
        else:
            prompt = body.get("prompt")
            if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
                input_len = len(prompt)
                prefix = self._keys(ids=prompt)
            elif isinstance(prompt, str):
                input_len = count_tokens(prompt, self.state.model.model_type)
                prefix = self._keys(text=prompt, input_len=input_len)
            else:
                return _error(400, "prompt must be a string or a list of token ids")
        try:
            max_new = int(body.get("max_completion_tokens") or body.get("max_tokens") or 128)
        except (TypeError, ValueError):
            return _error(400, "max_tokens must be an integer")
        stream = bool(body.get("stream", False))
        sim_request = self.state.new_request(
            input_len=input_len,
            max_new=max_new,
            ignore_eos=bool(body.get("ignore_eos")),
            streaming=stream,
            arrival=received,
            priority=body.get("priority"),
            prefix=prefix,
        )
        if chat and self.state.reasoning_parser and body.get("separate_reasoning", True):
            sim_request.reasoning_tokens = thinking_tokens(sim_request.target)
        engine = self.state.submit(sim_request)
        spec_details = bool(body.get("return_spec_tokens_details"))
        if not stream:
            await _wait_done(sim_request)
            return JSONResponse(self._openai_whole(sim_request, chat, spec_details))
        options = body.get("stream_options") or {}
        include_usage = bool(options.get("include_usage")) if isinstance(options, dict) else False
        return StreamingResponse(
            self._openai_stream(sim_request, engine, chat, include_usage, spec_details),
            media_type="text/event-stream",
        )

    async def completions(self, request: Request) -> Response:
        return await self._openai(request, chat=False)

    async def chat(self, request: Request) -> Response:
        return await self._openai(request, chat=True)

    def _openai_head(self, req: SimRequest, chat: bool) -> str:
        kind = "chat.completion.chunk" if chat else "text_completion"
        return (
            f'"id":"{req.rid}","object":"{kind}","created":{int(time.time())},'
            f'"model":"{self.state.served_name}"'
        )

    async def _openai_stream(
        self, req: SimRequest, engine: Engine, chat: bool, include_usage: bool, spec_details: bool
    ) -> AsyncIterator[str]:
        head = self._openai_head(req, chat)
        # Chat deltas always carry `reasoning_content` (null when not thinking), and a
        # chunk has no `usage` key unless it has usage (sglang 0.5.23
        # srt/entrypoints/openai/sse_utils.py:13-50, serving_chat.py:2583-2600).
        # Completion chunks are pydantic models and keep `"usage":null` (sglang 0.5.23
        # srt/entrypoints/openai/protocol.py:568-575).
        close = "]}\n\n" if chat else '],"usage":null}\n\n'
        tail = '"logprobs":null,"finish_reason":null,"matched_stop":null}' + close
        try:
            if chat:
                yield (
                    f'data: {{{head},"choices":[{{"index":0,"delta":{{"reasoning_content":null,'
                    f'"role":"assistant","content":""}},{tail}'
                )
            done = 0
            thinking = req.reasoning_tokens
            text, ends = req.tokens, req.tokens.text_ends
            async for chunks, _last in _chunks(req):
                await self._maybe_crash(req)
                self._mark_sent(req)
                parts = []
                for chunk in chunks:
                    count = chunk.completion_tokens
                    if not chat:
                        piece = text.text[ends[done] : ends[count]]
                        parts.append(
                            f'data: {{{head},"choices":[{{"index":0,"text":"{piece}",{tail}'
                        )
                        done = count
                        continue
                    # A step that crosses the end of thinking yields its reasoning part,
                    # then its content part (serving_chat.py:973-1000).
                    if done < thinking:
                        upto = min(count, thinking)
                        piece = text.text[ends[done] : ends[upto]]
                        parts.append(
                            f'data: {{{head},"choices":[{{"index":0,"delta":'
                            f'{{"reasoning_content":"{piece}"}},{tail}'
                        )
                        done = upto
                    if count > done:
                        piece = text.text[ends[done] : ends[count]]
                        parts.append(
                            f'data: {{{head},"choices":[{{"index":0,"delta":'
                            f'{{"reasoning_content":null,"content":"{piece}"}},{tail}'
                        )
                        done = count
                yield "".join(parts)
            if req.aborted:
                return
            reason = "length" if (req.finish_reason or {}).get("type") == "length" else "stop"
            delta = '"delta":{"reasoning_content":null}' if chat else '"text":""'
            yield (
                f'data: {{{head},"choices":[{{"index":0,{delta},"logprobs":null,'
                f'"finish_reason":"{reason}","matched_stop":null}}{close}'
            )
            if spec_details and self.state.decode.speculative and req.verify_ct:
                details = dumps({"spec_tokens_details": self._sglext_spec_details(req)})
                yield f'data: {{{head},"choices":[],"sglext":{details}}}\n\n'
            if include_usage:
                usage = dumps(_usage(req, self._cache_report))
                yield f'data: {{{head},"choices":[],"usage":{usage}}}\n\n'
            yield "data: [DONE]\n\n"
        finally:
            engine.abort(req)

    def _openai_whole(self, req: SimRequest, chat: bool, spec_details: bool) -> dict[str, Any]:
        reason = "length" if (req.finish_reason or {}).get("type") == "length" else "stop"
        text = req.tokens.text_upto(req.generated)
        thinking = req.tokens.text_upto(min(req.reasoning_tokens, req.generated))
        if req.reasoning_tokens:
            text = text[len(thinking) :]
        choice: dict[str, Any] = {
            "index": 0,
            "logprobs": None,
            "finish_reason": reason,
            "matched_stop": None,
        }
        if chat:
            choice["message"] = {
                "role": "assistant",
                "content": text,
                "reasoning_content": thinking if req.reasoning_tokens else None,
            }
        else:
            choice["text"] = text
        result: dict[str, Any] = {
            "id": req.rid,
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": self.state.served_name,
            "choices": [choice],
            "usage": _usage(req, self._cache_report),
        }
        if spec_details and self.state.decode.speculative and req.verify_ct:
            result["sglext"] = {"spec_tokens_details": self._sglext_spec_details(req)}
        return result


def _cache_details(cached: int) -> str:
    """`meta_info["cached_tokens_details"]`: null without a hit, else the device tier's count
    (sglang 0.5.23 srt/managers/scheduler_components/output_streamer.py:102-131, passed on at
    srt/managers/tokenizer_manager.py:2570-2576)."""
    return f'{{"device":{cached},"host":0}}' if cached > 0 else "null"


def _usage(req: SimRequest, cache_report: bool = False) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": req.input_len,
        "completion_tokens": req.generated,
        "total_tokens": req.input_len + req.generated,
        "reasoning_tokens": min(req.reasoning_tokens, req.generated),
    }
    if cache_report:
        # Only with --enable-cache-report (sglang 0.5.23
        # srt/entrypoints/openai/usage_processor.py:38-43, protocol.py:221-229).
        usage["prompt_tokens_details"] = {"cached_tokens": req.cached_tokens}
    return usage


def thinking_tokens(target: int) -> int:
    """How many of a chat answer's `target` tokens a thinking model spends reasoning: the
    first three quarters, leaving at least one answer token."""
    if target < 2:
        return 0
    return min(target - 1, max(1, target * 3 // 4))


async def _wait_done(req: SimRequest) -> None:
    while not req.done:
        req.event.clear()
        await req.event.wait()


async def _chunks(req: SimRequest) -> AsyncIterator[tuple[list[Chunk], bool]]:
    """Every chunk the engine produced, in order; several at once when the client lags."""
    sent = 0
    while True:
        if sent < len(req.chunks):
            pending = req.chunks[sent:]
            sent += len(pending)
            last = req.finished_at is not None and sent == len(req.chunks)
            yield pending, last
            continue
        if req.done:
            return
        req.event.clear()
        await req.event.wait()


def _poison(text: str) -> str:
    """Put NaN and +Inf where a dashboard reads throughput and acceptance."""
    out = []
    for line in text.splitlines():
        if line.startswith("sglang:gen_throughput{"):
            line = line.rsplit(" ", 1)[0] + " NaN"
        elif line.startswith("sglang:spec_accept_length{"):
            line = line.rsplit(" ", 1)[0] + " +Inf"
        out.append(line)
    return "\n".join(out) + "\n"
