package main

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The Deployment as a seed holds it after gardenlet deployed it and the
// provider extension's control-plane webhook mutated it. Each part names the
// file it follows (gardener/gardener and gardener/gardener-extension-provider-aws;
// the args are those of the newest release, shared/reference/gardener-deployment.md):
//
//   - gardenlet, pkg/component/nodemanagement/machinecontrollermanager/machine_controller_manager.go
//     (Deploy: labels, the MCM container, priority class, service account,
//     terminationGracePeriodSeconds 5, the Role and RoleBinding of the service
//     account in the shoot's namespace) and pkg/utils/gardener/shoot.go
//     (InjectGenericKubeconfig: the projected "kubeconfig" volume);
//   - the webhook, pkg/component/nodemanagement/machinecontrollermanager/provider.go
//     (ProviderSidecarContainer) as extension-aws pkg/webhook/controlplane/ensurer.go
//     (EnsureMachineControllerManagerDeployment) adds it, with the
//     workload-identity volume when the cloudprovider secret is a token requestor;
//   - at pod admission, gardener-resource-manager's projected token mount
//     (pkg/resourcemanager/webhook/projectedtokenmount/handler.go) adds the
//     service account token volume, since the service account does not
//     automount one (admittedPod below).

const (
	// pathGenericKubeconfig is gardenerutils.PathGenericKubeconfig.
	pathGenericKubeconfig   = "/var/run/secrets/gardener.cloud/shoot/generic-kubeconfig/kubeconfig"
	mountGenericKubeconfig  = "/var/run/secrets/gardener.cloud/shoot/generic-kubeconfig"
	mountWorkloadIdentity   = "/var/run/secrets/gardener.cloud/workload-identity"
	mountServiceAccount     = "/var/run/secrets/kubernetes.io/serviceaccount"
	genericKubeconfigSecret = "generic-token-kubeconfig-92e9ae14"
	shootAccessSecret       = "shoot-access-machine-controller-manager"
	upstreamMCMImage        = "europe-docker.pkg.dev/gardener-project/releases/gardener/machine-controller-manager:v0.62.1"
	portProviderMetrics     = 10259
)

func mcmLabels() map[string]string {
	return map[string]string{"app": "kubernetes", "role": "machine-controller-manager"}
}

func merge(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// providerArgs are ProviderSidecarContainer's arguments.
func providerArgs(namespace string) []string {
	return []string{
		"--control-kubeconfig=inClusterConfig",
		"--kube-api-qps=100",
		"--kube-api-burst=200",
		"--machine-creation-timeout=20m",
		"--machine-drain-timeout=2h",
		"--machine-health-timeout=10m",
		"--machine-safety-apiserver-statuscheck-timeout=30s",
		"--machine-safety-apiserver-statuscheck-period=1m",
		"--machine-safety-orphan-vms-period=30m",
		"--namespace=" + namespace,
		"--port=" + strconv.Itoa(portProviderMetrics),
		"--target-kubeconfig=" + pathGenericKubeconfig,
		"--v=3",
	}
}

// providerContainer is ProviderSidecarContainer(namespace, provider, image).
func providerContainer(namespace, provider, image string) corev1.Container {
	return corev1.Container{
		Name:            "machine-controller-manager-" + provider,
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            providerArgs(namespace),
		LivenessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/healthz", Port: intstr.FromInt32(portProviderMetrics), Scheme: corev1.URISchemeHTTP,
			}},
			InitialDelaySeconds: 30, TimeoutSeconds: 5, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
		},
		Ports: []corev1.ContainerPort{{Name: "providermetrics", ContainerPort: portProviderMetrics, Protocol: corev1.ProtocolTCP}},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("20Mi"),
		}},
		SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false)},
		VolumeMounts:    []corev1.VolumeMount{{Name: "kubeconfig", MountPath: mountGenericKubeconfig, ReadOnly: true}},
	}
}

func ptr[T any](v T) *T { return &v }

// renderDeployment is the mutated Deployment and its service account.
func renderDeployment(namespace, provider, image string, workloadIdentity bool) (*corev1.ServiceAccount, *appsv1.Deployment) {
	sa := &corev1.ServiceAccount{
		TypeMeta:                     metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta:                   metav1.ObjectMeta{Name: "machine-controller-manager", Namespace: namespace},
		AutomountServiceAccountToken: ptr(false),
	}
	mcm := corev1.Container{
		Name:            "machine-controller-manager",
		Image:           upstreamMCMImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{
			"./machine-controller-manager",
			"--control-kubeconfig=inClusterConfig",
			"--machine-safety-overshooting-period=1m",
			"--namespace=" + namespace,
			"--port=10258",
			"--safety-up=2",
			"--safety-down=1",
			"--target-kubeconfig=" + pathGenericKubeconfig,
			"--concurrent-syncs=30",
			"--kube-api-qps=150",
			"--kube-api-burst=200",
			"--v=3",
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/healthz", Port: intstr.FromInt32(10258), Scheme: corev1.URISchemeHTTP,
			}},
			FailureThreshold: 3, InitialDelaySeconds: 30, PeriodSeconds: 10, SuccessThreshold: 1, TimeoutSeconds: 5,
		},
		Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 10258, Protocol: corev1.ProtocolTCP}},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("31m"), corev1.ResourceMemory: resource.MustParse("70Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1024Mi")},
		},
		// InjectGenericKubeconfig mounts the volume into every container there is then.
		VolumeMounts: []corev1.VolumeMount{{Name: "kubeconfig", MountPath: mountGenericKubeconfig, ReadOnly: true}},
	}
	kubeconfigVolume := corev1.Volume{Name: "kubeconfig", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr[int32](420),
		Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: genericKubeconfigSecret},
				Items: []corev1.KeyToPath{{Key: "kubeconfig", Path: "kubeconfig"}}, Optional: ptr(false)}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: shootAccessSecret},
				Items: []corev1.KeyToPath{{Key: "token", Path: "token"}}, Optional: ptr(false)}},
		},
	}}}
	podLabels := merge(mcmLabels(), map[string]string{
		"gardener.cloud/role":                                           "controlplane",
		"maintenance.gardener.cloud/restart":                            "true",
		"networking.gardener.cloud/to-dns":                              "allowed",
		"networking.gardener.cloud/to-public-networks":                  "allowed",
		"networking.gardener.cloud/to-private-networks":                 "allowed",
		"networking.gardener.cloud/to-runtime-apiserver":                "allowed",
		"networking.resources.gardener.cloud/to-kube-apiserver-tcp-443": "allowed",
	})
	d := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "machine-controller-manager", Namespace: namespace,
			Labels: merge(mcmLabels(), map[string]string{
				"gardener.cloud/role": "controlplane",
				"high-availability-config.resources.gardener.cloud/type": "controller",
				// What the control-plane webhook's object selector matches.
				"extensions.gardener.cloud/mutated-by-controlplane-webhook": "true",
			}),
		},
		Spec: appsv1.DeploymentSpec{
			Replicas:             ptr[int32](1),
			RevisionHistoryLimit: ptr[int32](2),
			Selector:             &metav1.LabelSelector{MatchLabels: mcmLabels()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					Containers:                    []corev1.Container{mcm},
					PriorityClassName:             "gardener-system-300",
					ServiceAccountName:            sa.Name,
					TerminationGracePeriodSeconds: ptr[int64](5),
					Volumes:                       []corev1.Volume{kubeconfigVolume},
				},
			},
		},
	}
	// The webhook: exactly one container more, and the workload identity token for it only.
	sidecar := providerContainer(namespace, provider, image)
	if workloadIdentity {
		sidecar.VolumeMounts = append(sidecar.VolumeMounts, corev1.VolumeMount{Name: "workload-identity", MountPath: mountWorkloadIdentity})
		d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "workload-identity",
			VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cloudprovider"},
					Items: []corev1.KeyToPath{{Key: "token", Path: "token"}}}},
			}}}})
	}
	d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, sidecar)
	return sa, d
}

// admittedPod is the pod of d as the kubelet gets it, reduced to the provider
// container: gardener-resource-manager's projected service account token
// added (kube-api-access-gardener), and, for podman, every volume a host
// directory (hostDirs: volume name → directory), host network (the test's API
// servers and fake cloud listen on the host's loopback), no restart (a
// container that dies stays dead: the test sees it), and without the
// liveness probe (podman runs an httpGet probe as curl inside the container,
// which has neither; the test polls /healthz as the kubelet would). env is
// appended to the container's environment: what the kubelet injects
// (KUBERNETES_SERVICE_HOST/PORT) and the fake cloud's endpoint.
func admittedPod(d *appsv1.Deployment, provider, podName string, hostDirs map[string]string, env []corev1.EnvVar) (*corev1.Pod, error) {
	var c *corev1.Container
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == "machine-controller-manager-"+provider {
			c = d.Spec.Template.Spec.Containers[i].DeepCopy()
		}
	}
	if c == nil {
		return nil, fmt.Errorf("no container machine-controller-manager-%s in the Deployment", provider)
	}
	c.LivenessProbe = nil
	c.Ports = nil
	c.Env = append(c.Env, env...)
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "kube-api-access-gardener", MountPath: mountServiceAccount, ReadOnly: true})
	var volumes []corev1.Volume
	for _, m := range c.VolumeMounts {
		dir, ok := hostDirs[m.Name]
		if !ok {
			return nil, fmt.Errorf("no host directory for volume %s", m.Name)
		}
		volumes = append(volumes, corev1.Volume{Name: m.Name, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr(corev1.HostPathDirectory)}}})
	}
	spec := d.Spec.Template.Spec
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: podName, Labels: d.Spec.Template.Labels},
		Spec: corev1.PodSpec{
			HostNetwork:                   true,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: spec.TerminationGracePeriodSeconds,
			SecurityContext:               spec.SecurityContext,
			Containers:                    []corev1.Container{*c},
			Volumes:                       volumes,
		},
	}, nil
}

// renderSeedRBAC is what gardenlet grants the Deployment's service account in the shoot's
// namespace of the seed (machine_controller_manager.go, Deploy: the Role
// machine-controller-manager and its RoleBinding; nothing cluster-wide since gardener v1.119
// deletes the ClusterRoleBinding it made before): MCM's objects and their status, configmaps,
// secrets, endpoints, events and pods, and the two leader election leases.
func renderSeedRBAC(namespace, account string) (*rbacv1.Role, *rbacv1.RoleBinding) {
	all := []string{"create", "get", "list", "patch", "update", "watch", "delete", "deletecollection"}
	role := &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Name: "machine-controller-manager", Namespace: namespace},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"machine.sapcloud.io"}, Verbs: all, Resources: []string{
				"machineclasses", "machineclasses/status", "machinedeployments", "machinedeployments/status",
				"machines", "machines/status", "machinesets", "machinesets/status",
			}},
			{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets", "endpoints", "events", "pods"}, Verbs: all},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "watch", "update"},
				ResourceNames: []string{"machine-controller", "machine-controller-manager"}},
		},
	}
	binding := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: "machine-controller-manager", Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: namespace}},
	}
	return role, binding
}
