package ownctl

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// At most workers syncs at a time, a name is synced again after the delay
// its sync answered, and Run returns when ctx ends.
func TestRunBoundsTheWorkersAndRequeuesAfterTheDelay(t *testing.T) {
	queue := workqueue.NewTypedDelayingQueue[string]()
	var inFlight, top atomic.Int32
	var mu sync.Mutex
	seen := map[string]int{}
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	syncFn := func(_ context.Context, name string) time.Duration {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for cur := top.Load(); n > cur && !top.CompareAndSwap(cur, n); cur = top.Load() {
		}
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
	if !started || top.Load() != 2 {
		t.Errorf("started %v, %d syncs at once, want 2", started, top.Load())
	}
}
