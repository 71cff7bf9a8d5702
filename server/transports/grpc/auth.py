"""The gRPC half of caller identity: the interceptor that authenticates every A2A call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from a2a_grpc.core.service import V03_SERVICE_NAME, method_path
from a2a_grpc.server.trust.auth import (
    AuthenticationError,
    Authenticator,
    Presented,
    caller_of,
    set_caller,
)
from a2a_grpc.server.trust.mesh import grpc_peer_address

A2A_SERVICE_PREFIXES = (method_path(""), f"/{V03_SERVICE_NAME}/")
"""The paths of the A2A services (1.0 and 0.3): every call to them is authenticated."""


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Authenticates every A2A call; health and reflection stay open for probes and tools."""

    def __init__(self, authenticator: Authenticator) -> None:
        self.authenticator = authenticator

    async def intercept_service(
        self,
        continuation: Callable[[Any], Any],
        handler_call_details: Any,
    ) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None or not handler_call_details.method.startswith(A2A_SERVICE_PREFIXES):
            return handler
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(handler.unary_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._stream(handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler  # A2A has no client-streaming RPCs

    def _unary(self, behaviour: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        async def authenticated(request: Any, context: Any) -> Any:
            set_caller(await self._authenticate(context))
            return await behaviour(request, context)

        return authenticated

    def _stream(self, behaviour: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        async def authenticated(request: Any, context: Any) -> AsyncIterator[Any]:
            set_caller(await self._authenticate(context))
            async for response in behaviour(request, context):
                yield response

        return authenticated

    async def _authenticate(self, context: Any) -> str | AuthenticationError:
        """The caller's principal, or the refusal the servicer turns into UNAUTHENTICATED."""
        presented = Presented(
            tuple(context.invocation_metadata() or ()),
            context.auth_context() or {},
            grpc_peer_address(context.peer()),
        )
        return await caller_of(self.authenticator, presented)
