package driver

import (
	"errors"
	"strings"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	grpcstatus "google.golang.org/grpc/status"
)

// ErrorDomain is the domain of the ErrorInfo detail the sidecar puts on every
// error (proto/machinedriver/v1/driver.proto, server/src/status.rs).
const ErrorDomain = "machinedriver"

// ReasonSpotReclaimed is the ErrorInfo reason of the sidecar's GetMachineStatus
// answer (NOT_FOUND) for a machine whose Spot VM the cloud reclaimed
// (driver-api/src/error.rs, DriverError::spot_reclaimed).
const ReasonSpotReclaimed = "SPOT_RECLAIMED"

// toMCM converts any error of a sidecar call into the error MCM's controller
// understands: its own machinecodes status, whose text
// ("machine codes error: code = [X] message = [Y]") is all that
// status.FromError parses. gRPC codes 0-16 and MCM codes 0-16 have the same
// numbers. Transport errors become Unavailable (gRPC reports them so) and
// non-status errors Unknown. The sidecar's error is kept as the cause
// (status.WrapError: same text, so MCM reads it as before), for ErrorReason.
func toMCM(err error) error {
	if err == nil {
		return nil
	}
	s := grpcstatus.Convert(err)
	return status.WrapError(codes.Code(s.Code()), mcmMessage(s.Message()), err)
}

// ErrorReason is the reason of the sidecar's ErrorInfo detail (domain
// ErrorDomain) carried by err, an error a Driver method returned; "" when it
// has none (MCM's own errors, transport errors, an answer without details).
// MCM never sees details: its status has none.
func ErrorReason(err error) string {
	var s *status.Status
	if !errors.As(err, &s) || s.Cause() == nil {
		return ""
	}
	g, ok := grpcstatus.FromError(s.Cause())
	if !ok {
		return ""
	}
	for _, d := range g.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain {
			return info.GetReason()
		}
	}
	return ""
}

// RetryDelay is the delay of the sidecar's RetryInfo detail carried by err,
// an error a Driver method returned (the error table of
// proto/machinedriver/v1/driver.proto puts one on UNAVAILABLE when a delay is
// known); false when it has none or a delay that is not positive.
func RetryDelay(err error) (time.Duration, bool) {
	var s *status.Status
	if !errors.As(err, &s) || s.Cause() == nil {
		return 0, false
	}
	g, ok := grpcstatus.FromError(s.Cause())
	if !ok {
		return 0, false
	}
	for _, d := range g.Details() {
		if info, ok := d.(*errdetails.RetryInfo); ok {
			if delay := info.GetRetryDelay().AsDuration(); delay > 0 {
				return delay, true
			}
		}
	}
	return 0, false
}

// SpotReclaimed tells whether err (from GetMachineStatus) is the sidecar's
// answer for a machine whose Spot VM the cloud reclaimed: NotFound with the
// reason ReasonSpotReclaimed. message is the sidecar's message (it names the
// VM and how the cloud shows the reclaim).
func SpotReclaimed(err error) (message string, ok bool) {
	s, parsed := status.FromError(err)
	if err == nil || !parsed || s.Code() != codes.NotFound || ErrorReason(err) != ReasonSpotReclaimed {
		return "", false
	}
	return s.Message(), true
}

// mcmMessage keeps msg unless its square brackets are unbalanced, which would
// break MCM's two-group parse; then every bracket becomes a parenthesis.
// Balanced brackets such as "networkInterfaces[0].subnetID" survive.
func mcmMessage(msg string) string {
	depth := 0
	for _, r := range msg {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
			if depth < 0 {
				return replaceBrackets(msg)
			}
		}
	}
	if depth != 0 {
		return replaceBrackets(msg)
	}
	return msg
}

func replaceBrackets(msg string) string {
	return strings.NewReplacer("[", "(", "]", ")").Replace(msg)
}

// uninitialized is the error GetMachineStatus returns, together with its
// response, for a VM whose post-creation steps are pending: MCM then calls
// InitializeMachine with the providerID and node name of that response.
func uninitialized(pendingSteps []string) error {
	return status.Error(codes.Uninitialized, mcmMessage("initialization pending: "+strings.Join(pendingSteps, ",")))
}
