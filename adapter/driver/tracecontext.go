package driver

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// w3c writes and reads the W3C trace context headers (traceparent, tracestate).
var w3c = propagation.TraceContext{}

// propagateTraceContext is a unary client interceptor that sends the caller's
// W3C trace context (traceparent, tracestate) in each call's metadata, so the
// sidecar's span of the RPC joins the caller's trace (the server reads it in
// server/src/call.rs). A context without a span sends nothing: MCM's
// controllers start no traces of their own.
func propagateTraceContext(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(withTraceContext(ctx), method, req, reply, cc, opts...)
}

// withTraceContext adds ctx's trace context to its outgoing gRPC metadata.
func withTraceContext(ctx context.Context) context.Context {
	carrier := propagation.MapCarrier{}
	w3c.Inject(ctx, carrier)
	for _, key := range carrier.Keys() {
		ctx = metadata.AppendToOutgoingContext(ctx, key, carrier.Get(key))
	}
	return ctx
}
