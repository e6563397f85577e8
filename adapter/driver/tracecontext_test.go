package driver

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
)

func TestTraceContextTravelsAsW3CTraceparent(t *testing.T) {
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)

	md, _ := metadata.FromOutgoingContext(withTraceContext(ctx))
	got := md.Get("traceparent")
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("traceparent = %v, want [%s]", got, want)
	}

	md, _ = metadata.FromOutgoingContext(withTraceContext(context.Background()))
	if len(md.Get("traceparent")) != 0 {
		t.Fatalf("a context without a span sent traceparent %v", md.Get("traceparent"))
	}
}
