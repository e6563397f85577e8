package driver

import (
	"strings"

	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	grpcstatus "google.golang.org/grpc/status"
)

// toMCM converts any error of a sidecar call into the error MCM's controller
// understands: its own machinecodes status, whose text
// ("machine codes error: code = [X] message = [Y]") is all that
// status.FromError parses. gRPC codes 0-16 and MCM codes 0-16 have the same
// numbers. Transport errors become Unavailable (gRPC reports them so) and
// non-status errors Unknown.
func toMCM(err error) error {
	if err == nil {
		return nil
	}
	s := grpcstatus.Convert(err)
	return status.Error(codes.Code(s.Code()), mcmMessage(s.Message()))
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
