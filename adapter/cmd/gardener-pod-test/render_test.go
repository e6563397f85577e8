package main

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Gardener's arguments, as ProviderSidecarContainer sets them (issue 30).
const gardenerArgs = "--control-kubeconfig=inClusterConfig --kube-api-qps=100 --kube-api-burst=200 --machine-creation-timeout=20m " +
	"--machine-drain-timeout=2h --machine-health-timeout=10m --machine-safety-apiserver-statuscheck-timeout=30s " +
	"--machine-safety-apiserver-statuscheck-period=1m --machine-safety-orphan-vms-period=30m --namespace=shoot--a--b " +
	"--port=10259 --target-kubeconfig=/var/run/secrets/gardener.cloud/shoot/generic-kubeconfig/kubeconfig --v=3"

func TestTheWebhookAddsExactlyOneContainerWithGardenersArgs(t *testing.T) {
	_, d := renderDeployment("shoot--a--b", "gcp", "registry.example/mcm-provider-gcp:v1", false)
	spec := d.Spec.Template.Spec
	if len(spec.InitContainers) != 0 || len(spec.Containers) != 2 {
		t.Fatalf("%d init containers, %d containers; want 0 and MCM's plus one", len(spec.InitContainers), len(spec.Containers))
	}
	c := spec.Containers[1]
	if c.Name != "machine-controller-manager-gcp" || c.Image != "registry.example/mcm-provider-gcp:v1" || len(c.Command) != 0 {
		t.Fatalf("provider container %s image %s command %v", c.Name, c.Image, c.Command)
	}
	if got := strings.Join(c.Args, " "); got != gardenerArgs {
		t.Fatalf("args\n%s\nwant\n%s", got, gardenerArgs)
	}
	if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.LivenessProbe.HTTPGet.Port.IntValue() != 10259 || c.LivenessProbe.FailureThreshold != 3 {
		t.Fatalf("liveness %+v", c.LivenessProbe)
	}
	if *spec.TerminationGracePeriodSeconds != 5 {
		t.Fatalf("grace %d, want 5", *spec.TerminationGracePeriodSeconds)
	}
	for _, v := range spec.Volumes {
		if v.EmptyDir != nil {
			t.Fatalf("an emptyDir %s: Gardener adds none for the provider", v.Name)
		}
	}
	if c.SecurityContext == nil || *c.SecurityContext.AllowPrivilegeEscalation || c.SecurityContext.RunAsUser != nil {
		t.Fatalf("security context %+v: Gardener only forbids privilege escalation", c.SecurityContext)
	}
}

func TestWorkloadIdentityIsMountedOnlyIntoTheProviderContainer(t *testing.T) {
	_, d := renderDeployment("shoot--a--b", "aws", "img:1", true)
	mounted := func(c corev1.Container) bool {
		return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == "workload-identity" && m.MountPath == "/var/run/secrets/gardener.cloud/workload-identity"
		})
	}
	if mounted(d.Spec.Template.Spec.Containers[0]) || !mounted(d.Spec.Template.Spec.Containers[1]) {
		t.Fatal("the workload identity token must be mounted into the provider container only")
	}
	_, plain := renderDeployment("shoot--a--b", "aws", "img:1", false)
	if mounted(plain.Spec.Template.Spec.Containers[1]) {
		t.Fatal("workload identity mounted without a token requestor secret")
	}
}

func TestAdmittedPodKeepsTheContainerAndMapsEveryVolume(t *testing.T) {
	_, d := renderDeployment("shoot--a--b", "aws", "img:1", true)
	dirs := map[string]string{"kubeconfig": "/h/k", "workload-identity": "/h/w", "kube-api-access-gardener": "/h/s"}
	pod, err := admittedPod(d, "aws", "p", dirs, []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: "127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.Containers) != 1 || *pod.Spec.TerminationGracePeriodSeconds != 5 {
		t.Fatalf("pod %+v", pod.Spec)
	}
	c := pod.Spec.Containers[0]
	if strings.Join(c.Args, " ") != strings.Join(d.Spec.Template.Spec.Containers[1].Args, " ") || c.Image != "img:1" {
		t.Fatalf("container changed: %v %s", c.Args, c.Image)
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount" && m.ReadOnly
	}) {
		t.Fatal("no service account token mount (gardener-resource-manager's)")
	}
	if len(pod.Spec.Volumes) != 3 {
		t.Fatalf("volumes %+v", pod.Spec.Volumes)
	}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath == nil || v.HostPath.Path != dirs[v.Name] {
			t.Fatalf("volume %s: %+v", v.Name, v.VolumeSource)
		}
	}
	if _, err := admittedPod(d, "gcp", "p", dirs, nil); err == nil {
		t.Fatal("no error for a provider without a container")
	}
}

func TestCheckScrapeFindsDuplicates(t *testing.T) {
	ok := "# TYPE a counter\na{x=\"1\"} 1\na{x=\"2\"} 1\n# TYPE b gauge\nb 2\n"
	if fams, err := checkScrape(ok); err != nil || !fams["a"] || !fams["b"] {
		t.Fatalf("%v %v", fams, err)
	}
	for _, bad := range []string{
		ok + "# TYPE a counter\na{x=\"3\"} 1\n",
		"# TYPE a counter\na{x=\"1\"} 1\na{x=\"1\"} 2\n",
	} {
		if _, err := checkScrape(bad); err == nil {
			t.Fatalf("no duplicate found in\n%s", bad)
		}
	}
}

// The Role gardenlet grants in the seed is bound to the Deployment's own service account, and
// its leases rule names the lock the machine-controller takes (controller.go: "machine-controller").
func TestTheSeedRoleIsBoundToTheDeploymentsServiceAccount(t *testing.T) {
	sa, d := renderDeployment("shoot--a--b", "aws", "img:1", false)
	role, binding := renderSeedRBAC("shoot--a--b", sa.Name)
	if d.Spec.Template.Spec.ServiceAccountName != sa.Name || role.Namespace != "shoot--a--b" || binding.Namespace != role.Namespace {
		t.Fatalf("service account %s, Deployment's %s, Role in %s, RoleBinding in %s", sa.Name, d.Spec.Template.Spec.ServiceAccountName, role.Namespace, binding.Namespace)
	}
	if binding.RoleRef.Kind != "Role" || binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 ||
		binding.Subjects[0].Kind != "ServiceAccount" || binding.Subjects[0].Name != sa.Name || binding.Subjects[0].Namespace != "shoot--a--b" {
		t.Fatalf("binding %+v", binding)
	}
	leases := false
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, "leases") && slices.Contains(r.Verbs, "update") {
			leases = slices.Contains(r.ResourceNames, "machine-controller")
		}
	}
	if !leases {
		t.Fatalf("no update of the lease machine-controller in %+v", role.Rules)
	}
}
