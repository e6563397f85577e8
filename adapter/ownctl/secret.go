// Package ownctl is what the adapter's own controllers beside MCM's (the
// spot reclaim watcher, package reclaim, and the hot-update reconciler,
// package hotupdate) share: the class secret as MCM sends it to a driver,
// the wiring of the machine informer, and the loop of workers on a delaying
// queue of machine names.
package ownctl

import (
	"context"
	"fmt"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// ClassSecret is the merge of class's secretRef and credentialsSecretRef (keys of
// the latter win), as MCM sends it: a reference that is nil or names a
// secret that does not exist is skipped, as MCM's ValidateMachineClass and
// getSecret do (pkg/util/provider/machinecontroller/machine_util.go:79-189).
// The error names the secret, never its data.
func ClassSecret(ctx context.Context, secrets corev1client.SecretsGetter, class *v1alpha1.MachineClass) (*corev1.Secret, error) {
	data := map[string][]byte{}
	for _, ref := range []*corev1.SecretReference{class.SecretRef, class.CredentialsSecretRef} {
		if ref == nil {
			continue
		}
		s, err := secrets.Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("secret %s/%s of machine class %q: %w", ref.Namespace, ref.Name, class.Name, err)
		}
		for k, v := range s.Data {
			data[k] = v
		}
	}
	return &corev1.Secret{Data: data}, nil
}
