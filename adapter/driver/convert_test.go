package driver

import (
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/machine-driver/adapter/gen/machinedriver/v1"
)

func TestMachineClassAndSecretMapFieldByField(t *testing.T) {
	placement := `{"AvailabilityZone":"eu-west-1b","Tenancy":"host"}`
	m := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "m-1", UID: "uid-1", Labels: map[string]string{"node": "ip-10-0-0-1", "x": "y"},
			Annotations: map[string]string{"a": "b"}, CreationTimestamp: metav1.Unix(1_700_000_000, 0)},
		Spec: v1alpha1.MachineSpec{ProviderID: "aws:///eu-west-1/i-1", NodeTemplateSpec: v1alpha1.NodeTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"pool": "p"}, Annotations: map[string]string{"machine.sapcloud.io/awsPlacement": placement}},
			Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}}},
		}},
		Status: v1alpha1.MachineStatus{LastKnownState: `{"instanceId":"i-1"}`},
	}
	class := &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: "class", Namespace: "shoot--a--b"},
		Provider:     "AWS",
		ProviderSpec: runtime.RawExtension{Raw: []byte(`{"ami":"ami-1"}`)},
		NodeTemplate: &v1alpha1.NodeTemplate{
			Capacity:     corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
			InstanceType: "m5.large", Region: "eu-west-1", Zone: "eu-west-1a",
		},
	}
	got := toMachine(m, class)
	want := &pb.Machine{Name: "m-1", Namespace: "shoot--a--b", Uid: "uid-1", Labels: m.Labels,
		ProviderId: "aws:///eu-west-1/i-1", NodeName: "ip-10-0-0-1", LastKnownState: `{"instanceId":"i-1"}`,
		CreationTime: timestamppb.New(time.Unix(1_700_000_000, 0)), Annotations: map[string]string{"a": "b"},
		NodeTemplateSpec: &pb.NodeTemplateSpec{Labels: map[string]string{"pool": "p"},
			Annotations: map[string]string{"machine.sapcloud.io/awsPlacement": placement},
			Taints:      []*pb.Taint{{Key: "k", Value: "v", Effect: "NoSchedule"}}}}
	if got.String() != want.String() {
		t.Errorf("machine:\n got %v\nwant %v", got, want)
	}
	c := toMachineClass(class)
	if c.GetProviderSpec() != `{"ami":"ami-1"}` || c.GetProvider() != "AWS" || c.GetName() != "class" {
		t.Errorf("class %v", c)
	}
	nt := c.GetNodeTemplate()
	if nt.GetCapacity()["cpu"] != "2" || nt.GetCapacity()["memory"] != "8Gi" || nt.GetInstanceType() != "m5.large" || nt.GetZone() != "eu-west-1a" || nt.GetRegion() != "eu-west-1" {
		t.Errorf("node template %v", nt)
	}
	s := toSecret(&corev1.Secret{Data: map[string][]byte{"userData": []byte("#!/bin/sh")}})
	if string(s.GetData()["userData"]) != "#!/bin/sh" {
		t.Errorf("secret %v", s)
	}
	// The orphan collector's machine: name and providerID only.
	orphan := toMachine(&v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m-2"}, Spec: v1alpha1.MachineSpec{ProviderID: "p"}}, class)
	if orphan.GetNodeName() != "" || orphan.GetNamespace() != "shoot--a--b" || orphan.GetProviderId() != "p" || orphan.GetCreationTime() != nil || orphan.GetNodeTemplateSpec() != nil {
		t.Errorf("orphan %v", orphan)
	}
}

func TestAddressesAreKeptAndUnspecifiedDropped(t *testing.T) {
	got := toNodeAddresses([]*pb.Address{
		{Type: pb.AddressType_ADDRESS_TYPE_INTERNAL_IP, Address: "10.0.0.1"},
		{Type: pb.AddressType_ADDRESS_TYPE_UNSPECIFIED, Address: "x"},
		{Type: pb.AddressType_ADDRESS_TYPE_INTERNAL_DNS, Address: "ip-10-0-0-1.ec2.internal"},
		{Type: pb.AddressType_ADDRESS_TYPE_HOSTNAME, Address: "h"},
	})
	want := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeInternalDNS, Address: "ip-10-0-0-1.ec2.internal"}, {Type: corev1.NodeHostName, Address: "h"}}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%d: got %v want %v", i, got[i], want[i])
		}
	}
}

func TestPVSpecsGoAsJSON(t *testing.T) {
	got, err := toPVSpecs([]*corev1.PersistentVolumeSpec{
		{PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-1"}}},
		nil,
	})
	if err != nil || len(got) != 2 || got[1] != "null" || got[0] != `{"csi":{"driver":"ebs.csi.aws.com","volumeHandle":"vol-1"}}` {
		t.Errorf("got %q %v", got, err)
	}
}
