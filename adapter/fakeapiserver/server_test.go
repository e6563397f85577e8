package fakeapiserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	machineclient "github.com/gardener/machine-controller-manager/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func start(t *testing.T, resources []Resource) (*Server, *rest.Config) {
	t.Helper()
	s := New("secret-token", resources)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, &rest.Config{Host: s.URL(), BearerToken: "secret-token", TLSClientConfig: rest.TLSClientConfig{CAData: s.CACert}}
}

func TestTokenIsRequired(t *testing.T) {
	_, cfg := start(t, TargetCluster())
	cfg.BearerToken = "wrong"
	c := kubernetes.NewForConfigOrDie(cfg)
	if _, err := c.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("list with a wrong token: %v, want Unauthorized", err)
	}
}

func TestDiscoveryAdvertisesEvictionAndVersion(t *testing.T) {
	_, cfg := start(t, TargetCluster())
	c := kubernetes.NewForConfigOrDie(cfg)
	v, err := c.Discovery().ServerVersion()
	if err != nil || v.GitVersion != "v1.34.4" {
		t.Fatalf("version %+v, %v", v, err)
	}
	groups, err := c.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	var policy bool
	for _, g := range groups.Groups {
		policy = policy || g.Name == "policy" && g.PreferredVersion.GroupVersion == "policy/v1"
	}
	if !policy {
		t.Fatalf("no policy/v1 group: %+v", groups.Groups)
	}
	core, err := c.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	var eviction bool
	for _, r := range core.APIResources {
		eviction = eviction || r.Name == "pods/eviction" && r.Kind == "Eviction"
	}
	if !eviction {
		t.Fatalf("no pods/eviction: %+v", core.APIResources)
	}
	_, lists, err := c.Discovery().ServerGroupsAndResources()
	if err != nil || len(lists) < 3 {
		t.Fatalf("groups and resources: %d lists, %v", len(lists), err)
	}
}

func TestWritesVersionsWatchAndFinalizers(t *testing.T) {
	_, cfg := start(t, ControlCluster())
	ctx := context.Background()
	mc := machineclient.NewForConfigOrDie(cfg).MachineV1alpha1().Machines("ns")
	list, err := mc.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := mc.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	m, err := mc.Create(ctx, &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Finalizers: []string{"mcm"}},
		Status: v1alpha1.MachineStatus{CurrentStatus: v1alpha1.CurrentStatus{Phase: v1alpha1.MachinePending}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.UID == "" || m.ResourceVersion == "" || m.Namespace != "ns" {
		t.Fatalf("created %+v", m.ObjectMeta)
	}
	if _, err := mc.Create(ctx, m, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v", err)
	}
	// The status subresource: a PUT of the object keeps the status, /status changes only it.
	m.Labels = map[string]string{"node": "n1"}
	m.Status.CurrentStatus.Phase = v1alpha1.MachineRunning
	updated, err := mc.Update(ctx, m, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Labels["node"] != "n1" || updated.Status.CurrentStatus.Phase != v1alpha1.MachinePending || updated.ResourceVersion == m.ResourceVersion {
		t.Fatalf("update: labels %v, phase %s, rv %s (was %s)", updated.Labels, updated.Status.CurrentStatus.Phase, updated.ResourceVersion, m.ResourceVersion)
	}
	if _, err := mc.Update(ctx, m, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: %v, want Conflict", err)
	}
	updated.Status.CurrentStatus.Phase = v1alpha1.MachineRunning
	st, err := mc.UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil || st.Status.CurrentStatus.Phase != v1alpha1.MachineRunning {
		t.Fatalf("status update: %v %v", st, err)
	}
	// Deletion with a finalizer: a timestamp, then gone when it is removed.
	if err := mc.Delete(ctx, "m", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleting, err := mc.Get(ctx, "m", metav1.GetOptions{})
	if err != nil || deleting.DeletionTimestamp == nil {
		t.Fatalf("after delete: %v %v", deleting, err)
	}
	if _, err := mc.Patch(ctx, "m", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Get(ctx, "m", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after the last finalizer: %v, want NotFound", err)
	}
	var kinds []watch.EventType
	timeout := time.After(5 * time.Second)
	for len(kinds) < 5 {
		select {
		case e := <-w.ResultChan():
			kinds = append(kinds, e.Type)
		case <-timeout:
			t.Fatalf("events: %v", kinds)
		}
	}
	// Create, update, status update, delete (the deletion timestamp), the last finalizer removed.
	want := []watch.EventType{watch.Added, watch.Modified, watch.Modified, watch.Modified, watch.Deleted}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("events %v, want %v", kinds, want)
		}
	}
}

func TestPatchesSelectorsAndEviction(t *testing.T) {
	_, cfg := start(t, TargetCluster())
	ctx := context.Background()
	c := kubernetes.NewForConfigOrDie(cfg)
	if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n, err := c.CoreV1().Nodes().Patch(ctx, "n1", types.StrategicMergePatchType,
		[]byte(`{"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]}}`), metav1.PatchOptions{})
	if err != nil || len(n.Spec.Taints) != 1 {
		t.Fatalf("strategic merge patch: %v %v", n, err)
	}
	n, err = c.CoreV1().Nodes().Patch(ctx, "n1", types.JSONPatchType,
		[]byte(`[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]`), metav1.PatchOptions{})
	if err != nil || n.Labels["a"] != "b" || len(n.Spec.Taints) != 1 {
		t.Fatalf("JSON patch: %v %v", n, err)
	}
	for _, p := range []struct{ name, node string }{{"p1", "n1"}, {"p2", "n2"}} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name}, Spec: corev1.PodSpec{NodeName: p.node}}
		if _, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Name != "p1" {
		t.Fatalf("pods on n1: %+v %v", pods, err)
	}
	labelled, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "a=b"})
	if err != nil || len(labelled.Items) != 1 {
		t.Fatalf("nodes a=b: %+v %v", labelled, err)
	}
	err = c.PolicyV1().Evictions("default").Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "default"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods("default").Get(ctx, "p1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("evicted pod: %v, want NotFound", err)
	}
}

// A watch from a resourceVersion that does not parse: the API server's answer
// (HTTP 500, the Status without a reason, the field error as message; see
// parseWatchVersion), not a replay of every event.
func TestWatchRefusesAResourceVersionThatDoesNotParse(t *testing.T) {
	s, cfg := start(t, TargetCluster())
	c := kubernetes.NewForConfigOrDie(cfg)
	if _, err := c.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, rv := range []string{"abc", "-1", "1.5"} {
		// Bounded: a watch that started would stream until its timeout.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/api/v1/nodes?watch=true&resourceVersion="+rv, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		cancel()
		if err != nil {
			t.Errorf("resourceVersion %q: %d, a stream (%q, then %v), want the error Status", rv, resp.StatusCode, body, err)
			continue
		}
		var got map[string]any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("resourceVersion %q: %d %q: %v", rv, resp.StatusCode, body, err)
		}
		want := map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{}, "status": "Failure",
			"message": `resourceVersion: Invalid value: "` + rv + `": strconv.ParseUint: parsing "` + rv + `": invalid syntax`,
			"code":    float64(http.StatusInternalServerError)}
		if resp.StatusCode != http.StatusInternalServerError || !reflect.DeepEqual(got, want) {
			t.Errorf("resourceVersion %q: %d %s, want 500 %v", rv, resp.StatusCode, body, want)
		}
	}
	_, err = c.CoreV1().Nodes().Watch(context.Background(), metav1.ListOptions{ResourceVersion: "abc"})
	var se apierrors.APIStatus
	if !errors.As(err, &se) || se.Status().Code != http.StatusInternalServerError {
		t.Fatalf("client-go watch from \"abc\": %v, want the API server's 500 Status", err)
	}
}

// A watch from before the kept window: one ERROR event, 410 Expired, as from
// the API server's watch cache (the reflector relists on it); from the
// window's first resourceVersion - 1 on, every later event.
func TestWatchFromBeforeTheWindowIsExpired(t *testing.T) {
	s := New("secret-token", TargetCluster())
	s.Window = 2
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c := kubernetes.NewForConfigOrDie(&rest.Config{Host: s.URL(), BearerToken: "secret-token", TLSClientConfig: rest.TLSClientConfig{CAData: s.CACert}})
	ctx := context.Background()
	for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} { // resourceVersions 1-5; 1 and 2 dropped at the 4th write
		if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	next := func(w watch.Interface) watch.Event {
		t.Helper()
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended")
			}
			return e
		case <-time.After(5 * time.Second):
			t.Fatal("no event")
		}
		return watch.Event{}
	}
	w, err := c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatalf("watch from 1: %v, want the stream with an ERROR event", err)
	}
	e := next(w)
	st, ok := e.Object.(*metav1.Status)
	if e.Type != watch.Error || !ok || !apierrors.IsResourceExpired(apierrors.FromObject(e.Object)) ||
		st.Code != http.StatusGone || st.Message != "too old resource version: 1 (2)" {
		t.Fatalf("watch from 1: %s %#v, want ERROR 410 Expired \"too old resource version: 1 (2)\"", e.Type, e.Object)
	}
	select {
	case _, open := <-w.ResultChan():
		if open {
			t.Fatal("an event after the ERROR")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not end after the ERROR")
	}

	w, err = c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: "2"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, want := range []string{"n3", "n4", "n5"} {
		e := next(w)
		if n, ok := e.Object.(*corev1.Node); e.Type != watch.Added || !ok || n.Name != want {
			t.Fatalf("watch from 2: %s %v, want ADDED %s", e.Type, e.Object, want)
		}
	}
}
