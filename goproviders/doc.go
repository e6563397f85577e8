// Package goproviders runs gardener's Go machine-controller-manager providers for
// OpenStack and Azure, unmodified and in-process, against this repository's fake clouds
// (tests/fake-openstack, tests/fake-arm): independent clients written against the real
// clouds, so that the fakes are checked by code that was not fitted to them. Everything
// is in the tests; see README.md.
package goproviders
