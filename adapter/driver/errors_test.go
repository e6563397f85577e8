package driver

import (
	"errors"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	grpccodes "google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
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

// withInfo is the sidecar's error: code, message and an ErrorInfo detail of domain.
func withInfo(t *testing.T, c grpccodes.Code, msg, domain, reason string) error {
	t.Helper()
	s, err := grpcstatus.New(c, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: domain})
	if err != nil {
		t.Fatal(err)
	}
	return s.Err()
}

// The ErrorInfo reason survives the conversion for the adapter's own use,
// while MCM still reads code and message from the text alone.
func TestTheSidecarsReasonIsKeptBesideMCMsError(t *testing.T) {
	msg := "the cloud reclaimed Spot VM i-0abc: Server.SpotInstanceTermination"
	err := toMCM(withInfo(t, grpccodes.NotFound, msg, ErrorDomain, ReasonSpotReclaimed))
	if got, ok := status.FromError(err); !ok || got.Code() != codes.NotFound || got.Message() != msg {
		t.Fatalf("MCM reads ok=%v %v %q", ok, got.Code(), got.Message())
	}
	if r := ErrorReason(err); r != ReasonSpotReclaimed {
		t.Fatalf("reason %q", r)
	}
	if m, ok := SpotReclaimed(err); !ok || m != msg {
		t.Fatalf("SpotReclaimed = %q, %v", m, ok)
	}
	for name, other := range map[string]error{
		"NOT_FOUND without the reason": toMCM(withInfo(t, grpccodes.NotFound, "VM i-0abc not found", ErrorDomain, "NOT_FOUND")),
		"NOT_FOUND without details":    toMCM(grpcstatus.Error(grpccodes.NotFound, "gone")),
		"the reason on another code":   toMCM(withInfo(t, grpccodes.Unavailable, msg, ErrorDomain, ReasonSpotReclaimed)),
		"the reason of another domain": toMCM(withInfo(t, grpccodes.NotFound, msg, "example.com", ReasonSpotReclaimed)),
		"MCM's own error":              status.Error(codes.NotFound, msg),
		"no error":                     nil,
	} {
		if _, ok := SpotReclaimed(other); ok {
			t.Errorf("%s: taken as a reclaim", name)
		}
	}
}

// The sidecar's RetryInfo reaches the adapter's own callers beside MCM's error.
func TestTheSidecarsRetryDelayIsKept(t *testing.T) {
	st, err := grpcstatus.New(grpccodes.Unavailable, "throttled").WithDetails(
		&errdetails.ErrorInfo{Reason: "THROTTLED", Domain: ErrorDomain},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(7 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := RetryDelay(toMCM(st.Err())); !ok || d != 7*time.Second {
		t.Fatalf("RetryDelay = %v, %v; want 7s", d, ok)
	}
	for _, e := range []error{
		toMCM(grpcstatus.Error(grpccodes.Unavailable, "no details")),
		status.Error(codes.Unavailable, "MCM's own"),
		errors.New("not a status"),
	} {
		if d, ok := RetryDelay(e); ok {
			t.Errorf("%v: RetryDelay = %v", e, d)
		}
	}
}
