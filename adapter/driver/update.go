package driver

import (
	"context"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	corev1 "k8s.io/api/core/v1"

	pb "github.com/machine-driver/adapter/gen/machinedriver/v1"
)

// ReasonNeedsReplacement is the ErrorInfo reason of the sidecar's
// UpdateMachine answer (FAILED_PRECONDITION) when every field that differs
// needs a replacement (driver-api/src/update.rs, NEEDS_REPLACEMENT); its
// message names the fields.
const ReasonNeedsReplacement = "NEEDS_REPLACEMENT"

// UpdateMachineRequest is a hot update of one machine (UpdateMachine has no
// counterpart in MCM's driver.Driver: the adapter's class-update reconciler,
// package hotupdate, calls it).
type UpdateMachineRequest struct {
	// Machine is the machine whose VM is changed (providerID set).
	Machine *v1alpha1.Machine
	// MachineClass is its class as it is now: what the VM is changed to.
	MachineClass *v1alpha1.MachineClass
	// PreviousMachineClass is the class the machine was created or last
	// updated with, when known (nil otherwise: then no tag is removed).
	PreviousMachineClass *v1alpha1.MachineClass
	// Secret is the merge of the class's secretRef and credentialsSecretRef.
	Secret *corev1.Secret
	// ValidateOnly asks what would be done, changing nothing.
	ValidateOnly bool
}

// Outcome is what UpdateMachine did with one field.
type Outcome string

// The outcomes of a field (FieldChangeOutcome).
const (
	// Applied: changed in place (with ValidateOnly: would be).
	Applied Outcome = "applied"
	// Unchanged: the VM already has what the class asks for.
	Unchanged Outcome = "unchanged"
	// NeedsReplacement: only a new VM can have it; not applied.
	NeedsReplacement Outcome = "needs-replacement"
)

// FieldChange is the answer for one compared field of the class.
type FieldChange struct {
	// Field is the class field path ("providerSpec.tags").
	Field string
	// Outcome is what was done with it.
	Outcome Outcome
	// Detail says what changed, in words (never a secret).
	Detail string
}

// UpdateMachineResponse is the sidecar's answer.
type UpdateMachineResponse struct {
	// ProviderID is the VM's cloud id.
	ProviderID string
	// Changes has one entry per compared field, sorted by field.
	Changes []FieldChange
}

var outcomes = map[pb.FieldChangeOutcome]Outcome{
	pb.FieldChangeOutcome_FIELD_CHANGE_OUTCOME_APPLIED:           Applied,
	pb.FieldChangeOutcome_FIELD_CHANGE_OUTCOME_UNCHANGED:         Unchanged,
	pb.FieldChangeOutcome_FIELD_CHANGE_OUTCOME_NEEDS_REPLACEMENT: NeedsReplacement,
}

// UpdateMachine changes the machine's VM in place to what its class asks for
// (the sidecar must advertise CAPABILITY_UPDATE_MACHINE, see Has). Errors are
// MCM statuses as for the other calls (ErrorReason reads the sidecar's
// reason; NeedsReplacementOnly recognises the replacement-only answer). A
// field outcome the adapter does not know is an Internal error.
func (d *Driver) UpdateMachine(ctx context.Context, req *UpdateMachineRequest) (_ *UpdateMachineResponse, err error) {
	defer d.record("update_machine", time.Now(), &err)
	in := &pb.UpdateMachineRequest{
		Machine:      toMachine(req.Machine, req.MachineClass),
		MachineClass: toMachineClass(req.MachineClass),
		Secret:       toSecret(req.Secret),
		ValidateOnly: req.ValidateOnly,
	}
	if req.PreviousMachineClass != nil {
		in.PreviousMachineClass = toMachineClass(req.PreviousMachineClass)
	}
	resp, err := d.machines.UpdateMachine(ctx, in)
	if err != nil {
		return nil, toMCM(err)
	}
	out := &UpdateMachineResponse{ProviderID: resp.GetProviderId()}
	for _, c := range resp.GetChanges() {
		o, ok := outcomes[c.GetOutcome()]
		if !ok {
			return nil, status.Error(codes.Internal, mcmMessage("UpdateMachine answered field "+c.GetField()+" with outcome "+c.GetOutcome().String()))
		}
		out.Changes = append(out.Changes, FieldChange{Field: c.GetField(), Outcome: o, Detail: c.GetDetail()})
	}
	return out, nil
}

// NeedsReplacementOnly tells whether err (from UpdateMachine) is the
// sidecar's answer that only a replacement can change what differs:
// FailedPrecondition with the reason ReasonNeedsReplacement. message is the
// sidecar's message, which names the fields.
func NeedsReplacementOnly(err error) (message string, ok bool) {
	s, parsed := status.FromError(err)
	if err == nil || !parsed || s.Code() != codes.FailedPrecondition || ErrorReason(err) != ReasonNeedsReplacement {
		return "", false
	}
	return s.Message(), true
}
