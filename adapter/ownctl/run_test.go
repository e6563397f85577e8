package ownctl

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	machinefake "github.com/gardener/machine-controller-manager/pkg/client/clientset/versioned/fake"
	machineinformers "github.com/gardener/machine-controller-manager/pkg/client/informers/externalversions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/machine-driver/adapter/internal/sidecartest"
)

// At most workers syncs at a time, a name is synced again after the delay
// its sync answered, and Run returns when ctx ends.
func TestRunBoundsTheWorkersAndRequeuesAfterTheDelay(t *testing.T) {
	queue := workqueue.NewTypedDelayingQueue[string]()
	var inFlight sidecartest.InFlight
	var mu sync.Mutex
	seen := map[string]int{}
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	syncFn := func(_ context.Context, name string) time.Duration {
		defer inFlight.Enter()()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		seen[name]++
		if name == "again" && seen[name] == 1 {
			return 30 * time.Millisecond
		}
		if len(seen) == 6 && seen["again"] == 2 {
			close(done)
		}
		return 0
	}
	returned := make(chan struct{})
	started := false
	go func() {
		Run(ctx, queue, []cache.InformerSynced{func() bool { return true }}, 2, func() { started = true }, syncFn)
		close(returned)
	}()
	for _, name := range []string{"a", "b", "c", "d", "e", "again"} {
		queue.Add(name)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("synced %v", seen)
	}
	cancel()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	if !started || inFlight.Max() != 2 {
		t.Errorf("started %v, %d syncs at once, want 2", started, inFlight.Max())
	}
}

// WatchMachines indexes the machines under its name and calls changed for
// an add and an update, deleted for a delete.
func TestWatchMachinesIndexesAndHandsOnTheEvents(t *testing.T) {
	machines := machinefake.NewSimpleClientset()
	watched := sidecartest.WatchStarted(&machines.Fake, machines.Tracker(), "machines")
	factory := machineinformers.NewSharedInformerFactory(machines, 0)
	informer := factory.Machine().V1alpha1().Machines().Informer()
	var mu sync.Mutex
	var events []string
	record := func(what string) func(obj any) {
		return func(obj any) {
			key, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			mu.Lock()
			defer mu.Unlock()
			events = append(events, what+" "+key)
		}
	}
	byClass := func(obj any) ([]string, error) {
		return []string{obj.(*v1alpha1.Machine).Spec.Class.Name}, nil
	}
	if err := WatchMachines(informer, "class", byClass, record("changed"), record("deleted")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("caches never synced")
	}
	select {
	case <-watched:
	case <-time.After(10 * time.Second):
		t.Fatal("the informer never watched")
	}

	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns"}, Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Name: "c"}}}
	if _, err := machines.MachineV1alpha1().Machines("ns").Create(ctx, m, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m.Labels = map[string]string{"x": "1"}
	if _, err := machines.MachineV1alpha1().Machines("ns").Update(ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait := func(n int) []string {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			got := append([]string(nil), events...)
			mu.Unlock()
			if len(got) >= n || time.Now().After(deadline) {
				return got
			}
		}
	}
	if got := wait(2); fmt.Sprint(got) != "[changed ns/w changed ns/w]" {
		t.Fatalf("events %q, want two changed", got)
	}
	in, err := informer.GetIndexer().ByIndex("class", "c")
	if err != nil || len(in) != 1 {
		t.Fatalf("machines of class c: %v, %v", in, err)
	}
	if err := machines.MachineV1alpha1().Machines("ns").Delete(ctx, "w", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := wait(3); fmt.Sprint(got) != "[changed ns/w changed ns/w deleted ns/w]" {
		t.Errorf("events %q, want deleted last", got)
	}
}
