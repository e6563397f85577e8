// Package e2e runs MCM as Gardener runs it, on a real control plane, against every provider's
// sidecar on its fake cloud (issue 29, phase 2). It has tests only (fleet_test.go and the files
// next to it); controlplane/README.md says what runs, with which flags, identities and
// permissions, and how long it takes.
//
// Per provider: one etcd, two kube-apiservers on it with their own --etcd-prefix (the control
// cluster, where MCM's CRDs, deploy/'s rendered overlay, the MachineClasses and Secrets live,
// and the target cluster, where the Nodes are), each with its own CA and service-account
// keys, so that no token of one is valid on the other. Processes: the fake cloud, the
// provider's sidecar on it, the adapter's machine-controller on the sidecar's socket, and
// MCM's own machine-controller-manager; both controllers authenticate as the service account
// deploy/ defines (control) and as the identity Gardener gives MCM in the shoot (target),
// never as admin. The test plays the kubelet.
package e2e
