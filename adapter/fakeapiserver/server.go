// Package fakeapiserver is a small Kubernetes API server for the pod test of
// the Gardener image (deploy/gardener-pod-test.sh): it serves, over HTTPS
// with a bearer token, what MCM's machine-controller reads and writes in the
// control cluster (machines, machine classes, secrets, events, leases) and in
// the target cluster (nodes, pods and their eviction, volumes, PDBs,
// bootstrap token secrets), with the API server's semantics that MCM depends
// on: a new resourceVersion on every write, list-then-watch from a
// resourceVersion without gaps (and, as the API server's watch cache, an
// ERROR event 410 Expired for a resourceVersion older than the events it
// keeps, HTTP 500 for one that does not parse), conflicts on stale updates, the status
// subresource, deletion timestamps and finalizers, merge, JSON and strategic
// merge patches, discovery (groups, resources, the eviction subresource) and
// /version, /healthz.
//
// It stores objects as JSON maps, validates nothing beyond that, and enforces
// no RBAC; it exists because the machine-controller in the container needs
// an API server over the network and no kube-apiserver is available here
// (issue 29 brings the real one; the pod test takes a kubeconfig then).
package fakeapiserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"net"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/scheme"
)

// Resource is one served resource type.
type Resource struct {
	Group, Version, Name, Kind string
	Namespaced                 bool
	// Status: the resource has a status subresource (PUT on the resource
	// keeps the stored status, PUT on /status changes only the status).
	Status bool
	// Eviction: pods/eviction deletes the pod (no PDB is honoured).
	Eviction bool
}

func (r Resource) groupVersion() string {
	if r.Group == "" {
		return r.Version
	}
	return r.Group + "/" + r.Version
}

func (r Resource) groupResource() string {
	if r.Group == "" {
		return r.Name
	}
	return r.Name + "." + r.Group
}

// ControlCluster is what MCM's machine-controller uses in the control (seed) cluster.
func ControlCluster() []Resource {
	const m = "machine.sapcloud.io"
	return []Resource{
		{Version: "v1", Name: "namespaces", Kind: "Namespace", Status: true},
		{Version: "v1", Name: "secrets", Kind: "Secret", Namespaced: true},
		{Version: "v1", Name: "configmaps", Kind: "ConfigMap", Namespaced: true},
		{Version: "v1", Name: "events", Kind: "Event", Namespaced: true},
		{Group: m, Version: "v1alpha1", Name: "machines", Kind: "Machine", Namespaced: true, Status: true},
		{Group: m, Version: "v1alpha1", Name: "machineclasses", Kind: "MachineClass", Namespaced: true},
		{Group: m, Version: "v1alpha1", Name: "machinesets", Kind: "MachineSet", Namespaced: true, Status: true},
		{Group: m, Version: "v1alpha1", Name: "machinedeployments", Kind: "MachineDeployment", Namespaced: true, Status: true},
		{Group: "coordination.k8s.io", Version: "v1", Name: "leases", Kind: "Lease", Namespaced: true},
	}
}

// TargetCluster is what it uses in the target (shoot) cluster.
func TargetCluster() []Resource {
	return []Resource{
		{Version: "v1", Name: "namespaces", Kind: "Namespace", Status: true},
		{Version: "v1", Name: "nodes", Kind: "Node", Status: true},
		{Version: "v1", Name: "pods", Kind: "Pod", Namespaced: true, Status: true, Eviction: true},
		{Version: "v1", Name: "secrets", Kind: "Secret", Namespaced: true},
		{Version: "v1", Name: "events", Kind: "Event", Namespaced: true},
		{Version: "v1", Name: "persistentvolumes", Kind: "PersistentVolume", Status: true},
		{Version: "v1", Name: "persistentvolumeclaims", Kind: "PersistentVolumeClaim", Namespaced: true, Status: true},
		{Group: "policy", Version: "v1", Name: "poddisruptionbudgets", Kind: "PodDisruptionBudget", Namespaced: true, Status: true},
		{Group: "storage.k8s.io", Version: "v1", Name: "volumeattachments", Kind: "VolumeAttachment", Status: true},
	}
}

type object = map[string]any

type key struct{ gr, ns, name string }

type event struct {
	rv   int64
	gr   string
	ns   string
	kind string // ADDED, MODIFIED, DELETED
	obj  object
}

// Server is one fake API server (one cluster).
type Server struct {
	Token      string // the bearer token every request must carry
	GitVersion string

	resources []Resource
	byPath    map[string]Resource // "gv/name"

	// Window is how many of the latest writes a watch can start after (at
	// least; default 10000), as the API server's watch cache keeps a window
	// of events: a watch from an older resourceVersion gets 410 Expired.
	// Set it before Start.
	Window int

	mu      sync.Mutex
	rv      int64
	objects map[key]object
	log     []event
	// compacted is the resourceVersion of the newest event dropped from log
	// (0: none): a watch must start at it or after.
	compacted int64
	changed   chan struct{}
	// Requests counts requests by verb and resource (e.g. "create pods/eviction").
	requests map[string]int

	listener net.Listener
	http     *http.Server
	// CACert is the PEM of the self-signed certificate the server presents
	// (for 127.0.0.1 and localhost).
	CACert []byte
}

// New makes a server for resources.
func New(token string, resources []Resource) *Server {
	s := &Server{
		Token:      token,
		GitVersion: "v1.34.4",
		resources:  resources,
		byPath:     map[string]Resource{},
		objects:    map[key]object{},
		changed:    make(chan struct{}),
		requests:   map[string]int{},
	}
	for _, r := range resources {
		s.byPath[r.groupVersion()+"/"+r.Name] = r
	}
	return s
}

// Start listens on addr (e.g. 127.0.0.1:0) with TLS and serves until Close.
func (s *Server) Start(addr string) error {
	cert, pemCert, err := selfSigned()
	if err != nil {
		return err
	}
	s.CACert = pemCert
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s.listener = l
	s.http = &http.Server{Handler: s, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.http.ServeTLS(l, "", "") }()
	return nil
}

// URL is the server's https:// address.
func (s *Server) URL() string { return "https://" + s.listener.Addr().String() }

// Port is the port it listens on.
func (s *Server) Port() int { return s.listener.Addr().(*net.TCPAddr).Port }

// Close stops serving (open watches end).
func (s *Server) Close() error {
	if s.http == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.http.Shutdown(ctx)
	return s.http.Close()
}

// Requests returns how many requests of "verb resource[/sub]" were served.
func (s *Server) Requests(what string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[what]
}

func selfSigned() (tls.Certificate, []byte, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "fake-apiserver"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost", "kubernetes.default.svc"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	return cert, certPEM, err
}

// --- HTTP ------------------------------------------------------------------

type apiError struct {
	code    int
	reason  string
	message string
	details map[string]any
}

func (e *apiError) Error() string { return e.message }

func notFound(r Resource, name string) *apiError {
	return &apiError{http.StatusNotFound, "NotFound", fmt.Sprintf("%s %q not found", r.groupResource(), name),
		map[string]any{"name": name, "group": r.Group, "kind": r.Name}}
}

func conflict(r Resource, name, why string) *apiError {
	return &apiError{http.StatusConflict, "Conflict", fmt.Sprintf("Operation cannot be fulfilled on %s %q: %s", r.groupResource(), name, why),
		map[string]any{"name": name, "group": r.Group, "kind": r.Name}}
}

func badRequest(msg string) *apiError {
	return &apiError{http.StatusBadRequest, "BadRequest", msg, nil}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	writeJSON(w, statusOf(err).code, statusObject(err))
}

func statusOf(err error) *apiError {
	var e *apiError
	if !errors.As(err, &e) {
		e = &apiError{http.StatusInternalServerError, "InternalError", err.Error(), nil}
	}
	return e
}

// statusObject is the metav1.Status the API server writes for err (reason
// and details omitted when empty, as their omitempty tags do).
func statusObject(err error) object {
	e := statusOf(err)
	status := object{"kind": "Status", "apiVersion": "v1", "metadata": object{}, "status": "Failure",
		"message": e.message, "code": e.code}
	if e.reason != "" {
		status["reason"] = e.reason
	}
	if e.details != nil {
		status["details"] = e.details
	}
	return status
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+s.Token {
		writeError(w, &apiError{http.StatusUnauthorized, "Unauthorized", "Unauthorized", nil})
		return
	}
	path := strings.Trim(r.URL.Path, "/")
	switch path {
	case "healthz", "readyz", "livez":
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok")
		return
	case "version":
		writeJSON(w, http.StatusOK, object{"major": "1", "minor": strings.Split(strings.TrimPrefix(s.GitVersion, "v1."), ".")[0],
			"gitVersion": s.GitVersion, "platform": "linux/amd64"})
		return
	case "api":
		writeJSON(w, http.StatusOK, object{"kind": "APIVersions", "versions": []string{"v1"},
			"serverAddressByClientCIDRs": []object{{"clientCIDR": "0.0.0.0/0", "serverAddress": r.Host}}})
		return
	case "apis":
		writeJSON(w, http.StatusOK, s.groups())
		return
	}
	parts := strings.Split(path, "/")
	var gv string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		gv, parts = parts[1], parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		gv, parts = parts[1]+"/"+parts[2], parts[3:]
	default:
		writeError(w, &apiError{http.StatusNotFound, "NotFound", "the server could not find the requested resource", nil})
		return
	}
	if len(parts) == 0 {
		s.serveResourceList(w, gv)
		return
	}
	ns := ""
	if parts[0] == "namespaces" && len(parts) >= 3 {
		ns, parts = parts[1], parts[2:]
	}
	res, ok := s.byPath[gv+"/"+parts[0]]
	if !ok || len(parts) > 3 {
		writeError(w, &apiError{http.StatusNotFound, "NotFound", "the server could not find the requested resource", nil})
		return
	}
	name, sub := "", ""
	if len(parts) > 1 {
		name = parts[1]
	}
	if len(parts) > 2 {
		sub = parts[2]
	}
	if !res.Namespaced {
		ns = ""
	}
	s.count(r.Method, res, name, sub, r.URL.Query().Get("watch") == "true")
	var (
		out  any
		code = http.StatusOK
		err  error
	)
	switch {
	case r.Method == http.MethodGet && name == "" && r.URL.Query().Get("watch") == "true":
		s.watch(w, r, res, ns)
		return
	case r.Method == http.MethodGet && name == "":
		out, err = s.list(res, ns, r)
	case r.Method == http.MethodGet && sub == "":
		out, err = s.get(res, ns, name)
	case r.Method == http.MethodPost && name == "":
		out, err = s.create(res, ns, r)
		code = http.StatusCreated
	case r.Method == http.MethodPost && sub == "eviction" && res.Eviction:
		out, err = s.evict(res, ns, name)
		code = http.StatusCreated
	case r.Method == http.MethodPut && (sub == "" || sub == "status" && res.Status):
		out, err = s.update(res, ns, name, sub, r)
	case r.Method == http.MethodPatch && (sub == "" || sub == "status" && res.Status):
		out, err = s.patch(res, ns, name, sub, r)
	case r.Method == http.MethodDelete && name != "" && sub == "":
		out, err = s.delete(res, ns, name)
	default:
		err = &apiError{http.StatusMethodNotAllowed, "MethodNotAllowed", fmt.Sprintf("%s %s/%s not supported", r.Method, res.Name, sub), nil}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, code, out)
}

func (s *Server) count(method string, r Resource, name, sub string, watch bool) {
	verb := map[string]string{http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete"}[method]
	if verb == "" {
		verb = "get"
		if name == "" {
			verb = "list"
		}
		if watch {
			verb = "watch"
		}
	}
	what := verb + " " + r.Name
	if sub != "" {
		what += "/" + sub
	}
	s.mu.Lock()
	s.requests[what]++
	s.mu.Unlock()
}

func (s *Server) groups() object {
	var groups []object
	seen := map[string]bool{}
	for _, r := range s.resources {
		if r.Group == "" || seen[r.groupVersion()] {
			continue
		}
		seen[r.groupVersion()] = true
		v := object{"groupVersion": r.groupVersion(), "version": r.Version}
		groups = append(groups, object{"name": r.Group, "versions": []object{v}, "preferredVersion": v})
	}
	return object{"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
}

func (s *Server) serveResourceList(w http.ResponseWriter, gv string) {
	var list []object
	for _, r := range s.resources {
		if r.groupVersion() != gv {
			continue
		}
		verbs := []string{"create", "delete", "get", "list", "patch", "update", "watch"}
		list = append(list, object{"name": r.Name, "singularName": strings.ToLower(r.Kind), "namespaced": r.Namespaced, "kind": r.Kind, "verbs": verbs})
		if r.Status {
			list = append(list, object{"name": r.Name + "/status", "singularName": "", "namespaced": r.Namespaced, "kind": r.Kind, "verbs": []string{"get", "patch", "update"}})
		}
		if r.Eviction {
			list = append(list, object{"name": r.Name + "/eviction", "singularName": "", "namespaced": r.Namespaced, "group": "policy", "version": "v1", "kind": "Eviction", "verbs": []string{"create"}})
		}
	}
	if list == nil {
		writeError(w, &apiError{http.StatusNotFound, "NotFound", "the server could not find the requested resource", nil})
		return
	}
	writeJSON(w, http.StatusOK, object{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list})
}

// --- objects ---------------------------------------------------------------

func meta(o object) object {
	m, _ := o["metadata"].(object)
	if m == nil {
		m = object{}
		o["metadata"] = m
	}
	return m
}

func str(m object, k string) string {
	v, _ := m[k].(string)
	return v
}

func finalizers(o object) []any {
	f, _ := meta(o)["finalizers"].([]any)
	return f
}

func deepCopy(o object) object {
	b, _ := json.Marshal(o)
	var out object
	_ = json.Unmarshal(b, &out)
	return out
}

// protobufBodies decodes what client-go's typed clients of built-in types send
// (application/vnd.kubernetes.protobuf); answers are JSON, which they accept too.
var protobufBodies = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

func readObject(r *http.Request) (object, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		return nil, badRequest(err.Error())
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/vnd.kubernetes.protobuf") {
		typed, _, err := protobufBodies.Decode(body, nil, nil)
		if err != nil {
			return nil, badRequest("protobuf body: " + err.Error())
		}
		if body, err = json.Marshal(typed); err != nil {
			return nil, badRequest(err.Error())
		}
	}
	var o object
	if err := json.Unmarshal(body, &o); err != nil {
		return nil, badRequest("the body is not a JSON object: " + err.Error())
	}
	return o, nil
}

// commit stores o (or deletes it when del) under a new resourceVersion and
// records the event. s.mu is held.
func (s *Server) commit(res Resource, k key, o object, kind string) object {
	s.rv++
	meta(o)["resourceVersion"] = strconv.FormatInt(s.rv, 10)
	if kind == "DELETED" {
		delete(s.objects, k)
	} else {
		s.objects[k] = o
	}
	s.log = append(s.log, event{rv: s.rv, gr: res.groupResource(), ns: k.ns, kind: kind, obj: deepCopy(o)})
	window := s.Window
	if window <= 0 {
		window = defaultWindow
	}
	// Dropped in chunks (a copy every window writes): between window and 2*window are kept.
	if len(s.log) >= 2*window {
		drop := len(s.log) - window
		s.compacted = s.log[drop-1].rv
		s.log = append([]event(nil), s.log[drop:]...)
	}
	close(s.changed)
	s.changed = make(chan struct{})
	return deepCopy(o)
}

func (s *Server) stamp(res Resource, o object) {
	o["apiVersion"] = res.groupVersion()
	o["kind"] = res.Kind
}

func (s *Server) get(res Resource, ns, name string) (object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key{res.groupResource(), ns, name}]
	if !ok {
		return nil, notFound(res, name)
	}
	return deepCopy(o), nil
}

func (s *Server) create(res Resource, ns string, r *http.Request) (object, error) {
	o, err := readObject(r)
	if err != nil {
		return nil, err
	}
	s.stamp(res, o)
	m := meta(o)
	if res.Namespaced {
		if got := str(m, "namespace"); got != "" && got != ns {
			return nil, badRequest("the namespace of the object does not match the namespace of the request")
		}
		m["namespace"] = ns
	}
	name := str(m, "name")
	if name == "" && str(m, "generateName") != "" {
		suffix := make([]byte, 3)
		_, _ = rand.Read(suffix)
		name = str(m, "generateName") + hex.EncodeToString(suffix)[:5]
		m["name"] = name
	}
	if name == "" {
		return nil, badRequest("name or generateName is required")
	}
	uid := make([]byte, 16)
	_, _ = rand.Read(uid)
	m["uid"] = fmt.Sprintf("%x-%x-%x-%x-%x", uid[0:4], uid[4:6], uid[6:8], uid[8:10], uid[10:])
	m["creationTimestamp"] = time.Now().UTC().Format(time.RFC3339)
	m["generation"] = 1
	delete(m, "resourceVersion")
	delete(m, "deletionTimestamp")
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{res.groupResource(), ns, name}
	if _, exists := s.objects[k]; exists {
		return nil, &apiError{http.StatusConflict, "AlreadyExists", fmt.Sprintf("%s %q already exists", res.groupResource(), name),
			map[string]any{"name": name, "group": res.Group, "kind": res.Name}}
	}
	return s.commit(res, k, o, "ADDED"), nil
}

// put writes next over the stored object as PUT does; s.mu is held.
func (s *Server) put(res Resource, k key, old, next object, sub string) (object, error) {
	s.stamp(res, next)
	nm, om := meta(next), meta(old)
	if rv := str(nm, "resourceVersion"); rv != "" && rv != str(om, "resourceVersion") {
		return nil, conflict(res, k.name, "the object has been modified; please apply your changes to the latest version and try again")
	}
	switch {
	case sub == "status":
		status := next["status"]
		next = deepCopy(old)
		if status == nil {
			delete(next, "status")
		} else {
			next["status"] = status
		}
		nm = meta(next)
	case res.Status:
		if st, ok := old["status"]; ok {
			next["status"] = st
		} else {
			delete(next, "status")
		}
	}
	// What the client cannot change.
	for _, f := range []string{"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation", "namespace", "name"} {
		if v, ok := om[f]; ok {
			nm[f] = v
		} else {
			delete(nm, f)
		}
	}
	nm["resourceVersion"] = om["resourceVersion"]
	if reflect.DeepEqual(old, next) {
		return deepCopy(old), nil // a no-op write keeps the resourceVersion, as the API server does
	}
	if sub == "" && !reflect.DeepEqual(specOf(old), specOf(next)) {
		g, _ := om["generation"].(float64)
		if gi, ok := om["generation"].(int); ok {
			g = float64(gi)
		}
		nm["generation"] = g + 1
	}
	if om["deletionTimestamp"] != nil && len(finalizers(next)) == 0 {
		return s.commit(res, k, next, "DELETED"), nil
	}
	return s.commit(res, k, next, "MODIFIED"), nil
}

func specOf(o object) any {
	c := deepCopy(o)
	delete(c, "status")
	delete(c, "metadata")
	return c
}

func (s *Server) update(res Resource, ns, name, sub string, r *http.Request) (object, error) {
	next, err := readObject(r)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{res.groupResource(), ns, name}
	old, ok := s.objects[k]
	if !ok {
		return nil, notFound(res, name)
	}
	return s.put(res, k, deepCopy(old), next, sub)
}

func (s *Server) patch(res Resource, ns, name, sub string, r *http.Request) (object, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		return nil, badRequest(err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{res.groupResource(), ns, name}
	old, ok := s.objects[k]
	if !ok {
		return nil, notFound(res, name)
	}
	original, _ := json.Marshal(old)
	var patched []byte
	switch ct := strings.Split(r.Header.Get("Content-Type"), ";")[0]; ct {
	case "application/merge-patch+json":
		patched, err = jsonpatch.MergePatch(original, body)
	case "application/json-patch+json":
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(body); err == nil {
			patched, err = p.Apply(original)
		}
	case "application/strategic-merge-patch+json":
		typed, terr := scheme.Scheme.New(schema.GroupVersionKind{Group: res.Group, Version: res.Version, Kind: res.Kind})
		if terr != nil {
			return nil, &apiError{http.StatusUnsupportedMediaType, "UnsupportedMediaType", "strategic merge patch is not supported for " + res.groupResource(), nil}
		}
		patched, err = strategicpatch.StrategicMergePatch(original, body, typed)
	default:
		return nil, &apiError{http.StatusUnsupportedMediaType, "UnsupportedMediaType", "patch content type " + ct + " is not supported", nil}
	}
	if err != nil {
		return nil, badRequest("patch: " + err.Error())
	}
	var next object
	if err := json.Unmarshal(patched, &next); err != nil {
		return nil, badRequest(err.Error())
	}
	// A patch carries a resourceVersion precondition only when it names one.
	var p object
	if json.Unmarshal(body, &p) != nil || p["metadata"] == nil || str(meta(p), "resourceVersion") == "" {
		meta(next)["resourceVersion"] = meta(old)["resourceVersion"]
	}
	return s.put(res, k, deepCopy(old), next, sub)
}

func (s *Server) delete(res Resource, ns, name string) (object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{res.groupResource(), ns, name}
	old, ok := s.objects[k]
	if !ok {
		return nil, notFound(res, name)
	}
	o := deepCopy(old)
	if len(finalizers(o)) == 0 {
		return s.commit(res, k, o, "DELETED"), nil
	}
	m := meta(o)
	if m["deletionTimestamp"] == nil {
		m["deletionTimestamp"] = time.Now().UTC().Format(time.RFC3339)
		m["deletionGracePeriodSeconds"] = 0
		g, _ := m["generation"].(float64)
		m["generation"] = g + 1
		return s.commit(res, k, o, "MODIFIED"), nil
	}
	return o, nil
}

func (s *Server) evict(res Resource, ns, name string) (object, error) {
	if _, err := s.delete(res, ns, name); err != nil {
		return nil, err
	}
	return object{"kind": "Status", "apiVersion": "v1", "metadata": object{}, "status": "Success", "code": http.StatusCreated}, nil
}

// selector filters objects by the request's label and field selectors.
type selector struct {
	labels labels.Selector
	fields fields.Selector
}

func parseSelector(r *http.Request) (selector, error) {
	sel := selector{labels: labels.Everything(), fields: fields.Everything()}
	var err error
	if l := r.URL.Query().Get("labelSelector"); l != "" {
		if sel.labels, err = labels.Parse(l); err != nil {
			return sel, badRequest(err.Error())
		}
	}
	if f := r.URL.Query().Get("fieldSelector"); f != "" {
		if sel.fields, err = fields.ParseSelector(f); err != nil {
			return sel, badRequest(err.Error())
		}
	}
	return sel, nil
}

func (sel selector) matches(o object) bool {
	m := meta(o)
	set := labels.Set{}
	if l, ok := m["labels"].(object); ok {
		for k, v := range l {
			set[k], _ = v.(string)
		}
	}
	if !sel.labels.Matches(set) {
		return false
	}
	spec, _ := o["spec"].(object)
	status, _ := o["status"].(object)
	f := fields.Set{
		"metadata.name":      str(m, "name"),
		"metadata.namespace": str(m, "namespace"),
		"spec.nodeName":      str(spec, "nodeName"),
		"status.phase":       str(status, "phase"),
		"type":               str(o, "type"),
	}
	return sel.fields.Matches(f)
}

func (s *Server) list(res Resource, ns string, r *http.Request) (object, error) {
	sel, err := parseSelector(r)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	items := []object{}
	for k, o := range s.objects {
		if k.gr == res.groupResource() && (ns == "" || k.ns == ns) && sel.matches(o) {
			items = append(items, deepCopy(o))
		}
	}
	sort.Slice(items, func(i, j int) bool {
		a, b := meta(items[i]), meta(items[j])
		return str(a, "namespace")+"/"+str(a, "name") < str(b, "namespace")+"/"+str(b, "name")
	})
	return object{"kind": res.Kind + "List", "apiVersion": res.groupVersion(),
		"metadata": object{"resourceVersion": strconv.FormatInt(s.rv, 10)}, "items": items}, nil
}

// defaultWindow is Server.Window's default.
const defaultWindow = 10000

// parseWatchVersion parses a watch's resourceVersion as the API server does
// (APIObjectVersioner.ParseResourceVersion: "" and "0" are 0, anything else
// must be an unsigned integer). Its error is a storage.InvalidError, which
// the watch handler does not convert to a Status: the API server answers 500
// with no reason and the field error as message (kubernetes/kubernetes
// issues 101350, 139485: a 400 is proposed, not merged).
func parseWatchVersion(rv string) (uint64, error) {
	if rv == "" || rv == "0" {
		return 0, nil
	}
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		msg := field.ErrorList{field.Invalid(field.NewPath("resourceVersion"), rv, err.Error())}.ToAggregate().Error()
		return 0, &apiError{http.StatusInternalServerError, "", msg, nil}
	}
	return v, nil
}

// watch streams the events after the request's resourceVersion (or, without
// one, ADDED for every object first), until timeoutSeconds or the client
// goes. A resourceVersion older than the kept events gets, as from the API
// server's watch cache (watchCache.getAllEventsSinceLocked), the stream with
// one ERROR event, a Status 410 Expired "too old resource version: RV
// (OLDEST-1)", and its end.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, res Resource, ns string) {
	sel, err := parseSelector(r)
	if err != nil {
		writeError(w, err)
		return
	}
	rv := r.URL.Query().Get("resourceVersion")
	requested, err := parseWatchVersion(rv)
	if err != nil {
		writeError(w, err)
		return
	}
	timeout := 30 * time.Minute
	if t, err := strconv.Atoi(r.URL.Query().Get("timeoutSeconds")); err == nil && t > 0 {
		timeout = time.Duration(t) * time.Second
	}
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush() // the headers now: the client's Watch returns on them
	}
	enc := json.NewEncoder(w)
	send := func(kind string, o object) bool {
		if err := enc.Encode(object{"type": kind, "object": o}); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}

	s.mu.Lock()
	var from int64
	if requested == 0 {
		from = s.rv
		var initial []object
		for k, o := range s.objects {
			if k.gr == res.groupResource() && (ns == "" || k.ns == ns) && sel.matches(o) {
				initial = append(initial, deepCopy(o))
			}
		}
		s.mu.Unlock()
		for _, o := range initial {
			if !send("ADDED", o) {
				return
			}
		}
	} else {
		s.mu.Unlock()
		from = math.MaxInt64 // past every resourceVersion this server will write
		if requested < math.MaxInt64 {
			from = int64(requested)
		}
	}
	end := time.After(timeout)
	for {
		s.mu.Lock()
		if from < s.compacted {
			// Events after from are gone (checked under the lock that
			// reads the log: none is skipped in silence).
			compacted := s.compacted
			s.mu.Unlock()
			send("ERROR", statusObject(&apiError{http.StatusGone, "Expired",
				fmt.Sprintf("too old resource version: %d (%d)", from, compacted), nil}))
			return
		}
		var pending []event
		// The log is in resourceVersion order; find the first event after from.
		i := sort.Search(len(s.log), func(i int) bool { return s.log[i].rv > from })
		for _, e := range s.log[i:] {
			if e.gr == res.groupResource() && (ns == "" || e.ns == ns) && sel.matches(e.obj) {
				pending = append(pending, e)
			}
		}
		from = max(from, s.rv)
		changed := s.changed
		s.mu.Unlock()
		for _, e := range pending {
			if !send(e.kind, deepCopy(e.obj)) {
				return
			}
		}
		select {
		case <-changed:
		case <-end:
			return
		case <-r.Context().Done():
			return
		}
	}
}
