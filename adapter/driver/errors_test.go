package driver

import (
	"errors"
	"testing"

	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	grpccodes "google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

// Every gRPC code the sidecar answers reaches MCM as the same code, parsed by
// MCM's own status.FromError, with the message intact.
func TestEveryGRPCCodeReachesMCMAsItsCode(t *testing.T) {
	for c := grpccodes.OK + 1; c <= grpccodes.Unauthenticated; c++ {
		msg := "providerSpec.networkInterfaces[0].subnetID: is required"
		got, ok := status.FromError(toMCM(grpcstatus.Error(c, msg)))
		if !ok {
			t.Fatalf("%v: MCM cannot parse the converted error", c)
		}
		if int(got.Code()) != int(c) || got.Message() != msg {
			t.Errorf("%v: MCM reads code %v message %q", c, got.Code(), got.Message())
		}
	}
}

func TestErrorsMCMCouldNotParseAreMadeParsable(t *testing.T) {
	cases := []struct {
		name string
		err  error
		code codes.Code
		msg  string
	}{
		{"unbalanced brackets", grpcstatus.Error(grpccodes.InvalidArgument, "bad [value"), codes.InvalidArgument, "bad (value"},
		{"closing first", grpcstatus.Error(grpccodes.Internal, "a ] b [ c"), codes.Internal, "a ) b ( c"},
		{"not a status", errors.New("connection refused"), codes.Unknown, "connection refused"},
	}
	for _, tc := range cases {
		got, ok := status.FromError(toMCM(tc.err))
		if !ok || got.Code() != tc.code || got.Message() != tc.msg {
			t.Errorf("%s: got ok=%v code=%v msg=%q, want %v %q", tc.name, ok, got.Code(), got.Message(), tc.code, tc.msg)
		}
	}
	if toMCM(nil) != nil {
		t.Error("nil must stay nil")
	}
}

func TestUninitializedIsMCMsCode17WithTheSteps(t *testing.T) {
	got, ok := status.FromError(uninitialized([]string{"disable-source-dest-check", "assign-ipv6-prefixes"}))
	if !ok || got.Code() != codes.Uninitialized || int(got.Code()) != 17 {
		t.Fatalf("got ok=%v code=%v", ok, got.Code())
	}
	if got.Message() != "initialization pending: disable-source-dest-check,assign-ipv6-prefixes" {
		t.Errorf("message %q", got.Message())
	}
}
