"""A gRPC proxy in front of the Firestore emulator that cancels calls on its side, as
Firestore now and then does (`CANCELLED`, googleapis/nodejs-firestore#2167): the store's
handling of it, tested against the emulator behind.

Every call is passed on as bytes, unary or streamed as its method is; a `Commit` is
cancelled while `cancel` says so: `before` the emulator sees it, or `after` it applied it
(the answer lost on the way back, the case that makes a retry dangerous)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent import futures
from typing import Any, Literal

import grpc  # type: ignore[import-untyped]

# The emulator's streamed methods, by how they stream; every other is unary.
_SERVER_STREAMS = {"BatchGetDocuments", "RunQuery", "RunAggregationQuery", "PartitionQuery"}
_BIDI_STREAMS = {"Listen", "Write"}

Cancel = Literal["before", "after"]


class CancellingProxy:
    def __init__(self, target: str) -> None:
        self.channel = grpc.insecure_channel(target)
        self.cancel: list[Cancel] = []  # how the next Commits are cancelled, in turn
        self.commits = 0  # Commits the emulator applied
        self.server = grpc.server(futures.ThreadPoolExecutor(16))
        self.server.add_generic_rpc_handlers((_Handler(self),))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.stop(0)
        self.channel.close()


class _Handler(grpc.GenericRpcHandler):  # type: ignore[misc]
    def __init__(self, proxy: CancellingProxy) -> None:
        self.proxy = proxy

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method: str = details.method
        name = method.rsplit("/", 1)[-1]
        channel = self.proxy.channel
        metadata = details.invocation_metadata
        if name in _BIDI_STREAMS:
            streams = channel.stream_stream(method)

            def bidi(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
                yield from _relayed(lambda: streams(requests, metadata=metadata), context)

            return grpc.stream_stream_rpc_method_handler(bidi)
        if name in _SERVER_STREAMS:
            stream = channel.unary_stream(method)

            def served(request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
                yield from _relayed(lambda: stream(request, metadata=metadata), context)

            return grpc.unary_stream_rpc_method_handler(served)
        call = channel.unary_unary(method)

        def unary(request: bytes, context: grpc.ServicerContext) -> Any:
            cancel = self.proxy.cancel.pop(0) if name == "Commit" and self.proxy.cancel else None
            if cancel == "before":
                context.abort(grpc.StatusCode.CANCELLED, "call already cancelled")
            [answer] = _relayed(lambda: [call(request, metadata=metadata)], context)
            if name == "Commit":
                self.proxy.commits += 1
            if cancel == "after":
                context.abort(grpc.StatusCode.CANCELLED, "call already cancelled")
            return answer

        return grpc.unary_unary_rpc_method_handler(unary)


def _relayed(make: Callable[[], Iterable[bytes]], context: grpc.ServicerContext) -> Iterator[bytes]:
    """What the emulator answers, its error as its own status (not the proxy's UNKNOWN)."""
    try:
        yield from make()
    except grpc.RpcError as error:
        context.abort(error.code(), error.details() or "")
