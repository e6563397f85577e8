package ownctl

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const ns = "shoot--demo--cluster"

func class(secretRef, credentials string) *v1alpha1.MachineClass {
	c := &v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: ns}}
	if secretRef != "" {
		c.SecretRef = &corev1.SecretReference{Name: secretRef, Namespace: ns}
	}
	if credentials != "" {
		c.CredentialsSecretRef = &corev1.SecretReference{Name: credentials, Namespace: ns}
	}
	return c
}

func TestClassSecretMergesBothSecretsAndSkipsAbsentOnes(t *testing.T) {
	core := k8sfake.NewSimpleClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: ns},
			Data: map[string][]byte{"userData": []byte("#!/bin/sh"), "accessKeyID": []byte("old")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloudprovider", Namespace: ns},
			Data: map[string][]byte{"accessKeyID": []byte("AKIA")}},
	)
	for _, c := range []struct {
		name  string
		class *v1alpha1.MachineClass
		want  map[string]string
	}{
		{"both", class("worker", "cloudprovider"), map[string]string{"userData": "#!/bin/sh", "accessKeyID": "AKIA"}},
		{"credentials absent", class("worker", "gone"), map[string]string{"userData": "#!/bin/sh", "accessKeyID": "old"}},
		{"no references", class("", ""), map[string]string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := ClassSecret(context.Background(), core.CoreV1(), c.class)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Data) != len(c.want) {
				t.Fatalf("keys %v, want %v", s.Data, c.want)
			}
			for k, v := range c.want {
				if string(s.Data[k]) != v {
					t.Errorf("%s = %q, want %q", k, s.Data[k], v)
				}
			}
		})
	}
}

func TestClassSecretNamesTheSecretNotItsData(t *testing.T) {
	core := k8sfake.NewSimpleClientset()
	core.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	_, err := ClassSecret(context.Background(), core.CoreV1(), class("worker", ""))
	if err == nil || !strings.Contains(err.Error(), ns+"/worker") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err %v", err)
	}
}
