package ownctl

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Run waits for synced (the informers, started by the caller), calls
// started, and runs workers goroutines that take machine names off queue and
// call sync with each: at most workers syncs run at a time, never two for
// one name; a positive answer queues the name again after that delay. It
// returns when ctx ends (at once when the informers never synced), and then
// shuts queue down.
func Run(ctx context.Context, queue workqueue.TypedDelayingInterface[string], synced []cache.InformerSynced,
	workers int, started func(), sync func(context.Context, string) time.Duration) {
	defer queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	started()
	for range workers {
		go func() {
			for {
				name, quit := queue.Get()
				if quit {
					return
				}
				after := sync(ctx, name)
				queue.Done(name)
				if after > 0 {
					queue.AddAfter(name, after)
				}
			}
		}()
	}
	<-ctx.Done()
}

// WatchMachines indexes the machines of informer by index (under name) and
// calls changed with each machine added or updated and deleted with each one
// deleted (a *v1alpha1.Machine or a cache.DeletedFinalStateUnknown); the
// caller starts informer.
func WatchMachines(informer cache.SharedIndexInformer, name string, index cache.IndexFunc, changed, deleted func(obj any)) error {
	if err := informer.AddIndexers(cache.Indexers{name: index}); err != nil {
		return fmt.Errorf("machine index: %w", err)
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: deleted,
	})
	return err
}
