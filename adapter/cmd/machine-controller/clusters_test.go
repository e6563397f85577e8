package main

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	machineclient "github.com/gardener/machine-controller-manager/pkg/client/clientset/versioned"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/machine-driver/adapter/fakeapiserver"
)

// startClusters starts a control and a target fake API server over the
// network until t ends, writes their kubeconfigs to dir/control and
// dir/target (for --control-kubeconfig and --target-kubeconfig), and answers
// clients of both: kc and mc of the control cluster, tc of the target.
func startClusters(t *testing.T, dir string) (kc, tc *kubernetes.Clientset, mc *machineclient.Clientset) {
	t.Helper()
	control := fakeapiserver.New("control-token", fakeapiserver.ControlCluster())
	target := fakeapiserver.New("target-token", fakeapiserver.TargetCluster())
	for name, s := range map[string]*fakeapiserver.Server{"control": control, "target": target} {
		if err := s.Start("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		kubeconfig := fmt.Sprintf("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster:\n    server: %s\n    certificate-authority-data: %s\n"+
			"contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user:\n    token: %s\n",
			s.URL(), base64.StdEncoding.EncodeToString(s.CACert), s.Token)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(kubeconfig), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	config := func(s *fakeapiserver.Server) *rest.Config {
		return &rest.Config{Host: s.URL(), BearerToken: s.Token, TLSClientConfig: rest.TLSClientConfig{CAData: s.CACert}}
	}
	kc = kubernetes.NewForConfigOrDie(config(control))
	tc = kubernetes.NewForConfigOrDie(config(target))
	mc = machineclient.NewForConfigOrDie(config(control))
	return kc, tc, mc
}
