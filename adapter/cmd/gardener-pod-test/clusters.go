package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	machineclient "github.com/gardener/machine-controller-manager/pkg/client/clientset/versioned"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/machine-driver/controlplane/cluster"
)

// The shoot's identity for MCM, as deploy/target renders it: the service account
// gardenlet's shoot access secret names (gardener/gardener
// pkg/component/nodemanagement/machinecontrollermanager, newShootAccessSecret), authorized
// by the ClusterRole, Role and bindings computeShootResourcesData grants it.
const (
	targetNamespace = "kube-system"
	targetAccount   = "machine-controller-manager"
)

// apiServers are the seed and the shoot: two real kube-apiservers on one etcd
// (controlplane/cluster), the shoot's under --etcd-prefix=/target.
type apiServers struct {
	seed, shoot *cluster.Cluster
	// seedToken is a TokenRequest token of the Deployment's service account in the shoot's
	// namespace; shootToken one of kube-system/machine-controller-manager in the shoot.
	seedToken, shootToken string
}

// seedPort is the port of the seed's API server (KUBERNETES_SERVICE_PORT).
func (s *apiServers) seedPort() (string, error) {
	u, err := url.Parse(s.seed.URL)
	if err != nil {
		return "", err
	}
	return u.Port(), nil
}

func (s *apiServers) stop() {
	for _, c := range []*cluster.Cluster{s.shoot, s.seed} { // the shoot's API server uses the seed's etcd
		if c != nil {
			if err := c.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "gardener-pod-test: stopping an API server: %v\n", err)
			}
		}
	}
}

// startAPIServers starts the seed (MCM's CRDs installed from MCM's module; the rendered
// objects, RBAC included, applied in the shoot's namespace as gardenlet applies them) and the
// shoot (deploy/target's rendering applied, as gardenlet's managed resource does), and mints
// the two tokens the pod gets. The test's own clients are the admins of both.
func (t *test) startAPIServers() error {
	bin, err := cluster.DefaultBinDir()
	if err != nil {
		return err
	}
	if !cluster.BinariesPresent(bin) {
		return fmt.Errorf("no etcd and kube-apiserver in %s: run controlplane/build.sh (or set %s)", bin, cluster.EnvBinDir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := &apiServers{}
	t.servers = s
	began := time.Now()
	if s.seed, err = cluster.Start(ctx, cluster.Options{BinDir: bin}); err != nil {
		return fmt.Errorf("seed API server: %w", err)
	}
	if _, err := s.seed.InstallMCMCRDs(ctx); err != nil {
		return fmt.Errorf("seed: MCM's CRDs: %w", err)
	}
	if s.shoot, err = cluster.Start(ctx, cluster.Options{BinDir: bin, Etcd: s.seed.EtcdURL, EtcdPrefix: "/target"}); err != nil {
		return fmt.Errorf("shoot API server: %w", err)
	}
	fmt.Printf("    seed and shoot kube-apiservers (one etcd; MCM's CRDs in the seed) up in %.1f s\n", time.Since(began).Seconds())

	// The seed: the shoot's namespace, then what render printed (service account, Role,
	// RoleBinding, Deployment), as gardenlet creates them.
	if err := s.seed.EnsureNamespace(ctx, t.ns); err != nil {
		return err
	}
	for _, o := range t.rendered {
		if o.GetNamespace() == "" {
			o.SetNamespace(t.ns)
		}
	}
	if err := cluster.Apply(ctx, s.seed.Admin, t.rendered); err != nil {
		return fmt.Errorf("seed: applying %s: %w", t.deploymentFile, err)
	}
	account := t.deployment.Spec.Template.Spec.ServiceAccountName
	seedCfg, err := s.seed.ServiceAccountConfig(ctx, t.ns, account)
	if err != nil {
		return err
	}
	s.seedToken = seedCfg.BearerToken

	// The shoot: deploy/target as rendered.
	if err := s.shoot.EnsureNamespace(ctx, targetNamespace); err != nil {
		return err
	}
	rendered, err := cluster.Kustomize(t.targetManifests)
	if err != nil {
		return err
	}
	objs, err := cluster.DecodeManifests(rendered)
	if err != nil {
		return err
	}
	if err := cluster.Apply(ctx, s.shoot.Admin, objs); err != nil {
		return fmt.Errorf("shoot: applying %s: %w", t.targetManifests, err)
	}
	shootCfg, err := s.shoot.ServiceAccountConfig(ctx, targetNamespace, targetAccount)
	if err != nil {
		return err
	}
	s.shootToken = shootCfg.BearerToken
	fmt.Printf("    seed: %d objects of the rendered file applied, the pod's token is service account %s/%s's; shoot: %s applied (%d objects), its token kube-system/%s's\n",
		len(t.rendered), t.ns, account, t.targetManifests, len(objs), targetAccount)

	if t.kc, err = s.seed.AdminClient(); err != nil {
		return err
	}
	if t.mc, err = machineclient.NewForConfig(s.seed.Admin); err != nil {
		return err
	}
	t.tc, err = kubernetes.NewForConfig(s.shoot.Admin)
	return err
}

// readRendered is every object of render's output (the Deployment among them).
func readRendered(path string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := cluster.DecodeManifests(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	if !strings.Contains(strings.Join(kinds, ","), "Deployment") {
		return nil, fmt.Errorf("%s: no Deployment among %v", path, kinds)
	}
	return objs, nil
}

// The shoot's workload, played by the test as the shoot's kube-controller-manager and kubelet
// would run it (neither runs here).
const workloadName = "workload"

// startWorkload runs one pod on nodeName, owned by a ReplicaSet, as a drain finds it: the
// namespace's default service account (the ServiceAccount admission plugin refuses a pod
// without it; kube-controller-manager would create it), the ReplicaSet, and the pod bound to
// the node, reported Running.
func (t *test) startWorkload(ctx context.Context, nodeName string) error {
	const ns = metav1.NamespaceDefault
	if _, err := t.tc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	labels := map[string]string{"app": workloadName}
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}
	rs, err := t.tc.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: workloadName},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	spec.NodeName = nodeName
	pod, err := t.tc.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: workloadName, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr(true)}}},
		Spec: spec,
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	_, err = t.tc.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return err
}

// podEvicted plays the kubelet at the workload's deletion: once the pod is being deleted, it
// notes whether the Eviction API did it (the DisruptionTarget condition, reason
// EvictionByEvictionAPI, that the API server sets on an eviction and not on a plain delete)
// and removes it for good, as the kubelet does once its containers stopped (a delete with
// grace period 0). It is true once the pod is gone.
func (t *test) podEvicted() (bool, string) {
	ctx := context.Background()
	pods := t.tc.CoreV1().Pods(metav1.NamespaceDefault)
	pod, err := pods.Get(ctx, workloadName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, ""
	}
	if err != nil {
		return false, err.Error()
	}
	if pod.DeletionTimestamp == nil {
		return false, "the pod is not being deleted"
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "EvictionByEvictionAPI" {
			t.evicted = true
		}
	}
	err = pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	return false, fmt.Sprintf("the pod is being deleted (evicted: %v); the kubelet's final delete: %v", t.evicted, err)
}
