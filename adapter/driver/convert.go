package driver

import (
	"encoding/json"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"

	pb "github.com/machine-driver/adapter/gen/machinedriver/v1"
)

// toMachine maps MCM's Machine onto the contract: the node name comes from
// the machine's `node` label (v1alpha1.NodeLabelKey), the namespace from the
// class when the machine has none (the orphan collector's dummy machines).
func toMachine(m *v1alpha1.Machine, class *v1alpha1.MachineClass) *pb.Machine {
	if m == nil {
		return &pb.Machine{}
	}
	ns := m.Namespace
	if ns == "" && class != nil {
		ns = class.Namespace
	}
	out := &pb.Machine{
		Name:           m.Name,
		Namespace:      ns,
		Uid:            string(m.UID),
		Labels:         m.Labels,
		ProviderId:     m.Spec.ProviderID,
		NodeName:       m.Labels[v1alpha1.NodeLabelKey],
		LastKnownState: m.Status.LastKnownState,
		Annotations:    m.Annotations,
	}
	// The node template: providers read settings from its annotations as the Go
	// providers do (AWS: machine.sapcloud.io/awsPlacement).
	if nt := toNodeTemplateSpec(&m.Spec.NodeTemplateSpec); nt != nil {
		out.NodeTemplateSpec = nt
	}
	// A young machine whose VM the cloud does not show yet is "not visible yet",
	// not NOT_FOUND, also after a sidecar restart.
	if !m.CreationTimestamp.IsZero() {
		out.CreationTime = timestamppb.New(m.CreationTimestamp.Time)
	}
	return out
}

// toNodeTemplateSpec maps the machine's node template (labels, annotations,
// taints); nil when it has none of them.
func toNodeTemplateSpec(t *v1alpha1.NodeTemplateSpec) *pb.NodeTemplateSpec {
	if len(t.Labels) == 0 && len(t.Annotations) == 0 && len(t.Spec.Taints) == 0 {
		return nil
	}
	out := &pb.NodeTemplateSpec{Labels: t.Labels, Annotations: t.Annotations}
	for _, taint := range t.Spec.Taints {
		out.Taints = append(out.Taints, &pb.Taint{Key: taint.Key, Value: taint.Value, Effect: string(taint.Effect)})
	}
	return out
}

// toMachineClass maps MCM's MachineClass: the provider spec is its raw JSON,
// unchanged; the node template's capacity goes as quantity strings.
func toMachineClass(c *v1alpha1.MachineClass) *pb.MachineClass {
	if c == nil {
		return &pb.MachineClass{}
	}
	out := &pb.MachineClass{Name: c.Name, Provider: c.Provider, ProviderSpec: string(c.ProviderSpec.Raw)}
	if t := c.NodeTemplate; t != nil {
		capacity := make(map[string]string, len(t.Capacity))
		for name, q := range t.Capacity {
			capacity[string(name)] = q.String()
		}
		out.NodeTemplate = &pb.NodeTemplate{
			Capacity:     capacity,
			InstanceType: t.InstanceType,
			Region:       t.Region,
			Zone:         t.Zone,
		}
	}
	return out
}

// toSecret maps the secret's data unchanged (credentials and userData).
func toSecret(s *corev1.Secret) *pb.SecretData {
	if s == nil {
		return &pb.SecretData{}
	}
	return &pb.SecretData{Data: s.Data}
}

// toPVSpecs sends each PersistentVolumeSpec as its JSON; nil as `null`.
func toPVSpecs(specs []*corev1.PersistentVolumeSpec) ([]string, error) {
	out := make([]string, 0, len(specs))
	for _, s := range specs {
		b, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		out = append(out, string(b))
	}
	return out, nil
}

var addressTypes = map[pb.AddressType]corev1.NodeAddressType{
	pb.AddressType_ADDRESS_TYPE_INTERNAL_IP:  corev1.NodeInternalIP,
	pb.AddressType_ADDRESS_TYPE_EXTERNAL_IP:  corev1.NodeExternalIP,
	pb.AddressType_ADDRESS_TYPE_INTERNAL_DNS: corev1.NodeInternalDNS,
	pb.AddressType_ADDRESS_TYPE_EXTERNAL_DNS: corev1.NodeExternalDNS,
	pb.AddressType_ADDRESS_TYPE_HOSTNAME:     corev1.NodeHostName,
}

// toNodeAddresses keeps the sidecar's addresses; an unspecified type is dropped.
func toNodeAddresses(in []*pb.Address) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	for _, a := range in {
		if t, ok := addressTypes[a.GetType()]; ok {
			out = append(out, corev1.NodeAddress{Type: t, Address: a.GetAddress()})
		}
	}
	return out
}
