package metricsmerge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// What the Rust driver serves (metrics-exporter-prometheus: TYPE lines, no HELP).
const driverExposition = `# TYPE mcm_cloud_api_requests_total counter
mcm_cloud_api_requests_total{provider="aws",service="ec2.DescribeInstances"} 3
mcm_cloud_api_requests_total{provider="aws",service="ec2.RunInstances"} 1

# TYPE mcm_cloud_api_requests_failed_total counter
mcm_cloud_api_requests_failed_total{provider="aws",service="ec2.RunInstances"} 1

# TYPE mcm_cloud_api_driver_requests_failed_total counter
mcm_cloud_api_driver_requests_failed_total{provider="aws",operation="get_machine_status",error_code="5"} 1

# TYPE machine_driver_rpc_duration_seconds histogram
machine_driver_rpc_duration_seconds_bucket{rpc="GetMachineStatus",le="0.5"} 1
machine_driver_rpc_duration_seconds_bucket{rpc="GetMachineStatus",le="+Inf"} 1
machine_driver_rpc_duration_seconds_sum{rpc="GetMachineStatus"} 0.01
machine_driver_rpc_duration_seconds_count{rpc="GetMachineStatus"} 1

# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 9
`

// serve merges own with a driver serving body, and returns one scrape's text.
func serve(t *testing.T, own *prometheus.Registry, body string, status int) string {
	t.Helper()
	driver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	defer driver.Close()
	g := &Gatherer{Own: own, URL: func() string { return driver.URL + "/metrics" }}
	front := httptest.NewServer(promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	defer front.Close()
	resp, err := http.Get(front.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	text, _ := io.ReadAll(resp.Body)
	return string(text)
}

func ownRegistry() (*prometheus.Registry, *prometheus.CounterVec) {
	reg := prometheus.NewRegistry()
	failed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcm_cloud_api_driver_requests_failed_total", Help: "MCM's own",
	}, []string{"provider", "operation", "error_code"})
	failed.WithLabelValues("aws", "get_machine_status", "5").Add(2)
	unused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcm_cloud_api_requests_total", Help: "registered by MCM, recorded by nobody in the controller",
	}, []string{"provider", "service"})
	reg.MustRegister(failed, unused, prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return reg, failed
}

func TestEachFamilyOnceWithTheDriversCloudSeries(t *testing.T) {
	own, _ := ownRegistry()
	text := serve(t, own, driverExposition, http.StatusOK)
	types := map[string]int{}
	series := map[string]int{}
	for _, line := range strings.Split(text, "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			types[strings.Fields(name)[0]]++
		} else if line != "" && !strings.HasPrefix(line, "#") {
			series[line[:strings.LastIndex(line, " ")]]++
		}
	}
	for name, n := range types {
		if n != 1 {
			t.Errorf("family %s appears %d times", name, n)
		}
	}
	for s, n := range series {
		if n != 1 {
			t.Errorf("series %s appears %d times", s, n)
		}
	}
	for _, want := range []string{
		`mcm_cloud_api_requests_total{provider="aws",service="ec2.DescribeInstances"} 3`,
		`mcm_cloud_api_requests_failed_total{provider="aws",service="ec2.RunInstances"} 1`,
		`machine_driver_rpc_duration_seconds_count{rpc="GetMachineStatus"} 1`,
		// The controller's count of the driver calls, not the driver's own copy (1).
		`mcm_cloud_api_driver_requests_failed_total{error_code="5",operation="get_machine_status",provider="aws"} 2`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("scrape lacks %s:\n%s", want, text)
		}
	}
	// The driver's process series would claim another process's numbers under
	// the controller's names: left out (the controller has its own).
	if strings.Contains(text, "process_cpu_seconds_total 9") {
		t.Errorf("the driver's process_cpu_seconds_total was served:\n%s", text)
	}
}

func TestDriverDownServesTheControllersAndCountsTheFailure(t *testing.T) {
	own, _ := ownRegistry()
	before := testutil.ToFloat64(ScrapeFailures)
	text := serve(t, own, "", http.StatusServiceUnavailable)
	if !strings.Contains(text, "mcm_cloud_api_driver_requests_failed_total") || strings.Contains(text, "mcm_cloud_api_requests_total{") {
		t.Fatalf("scrape with the driver down:\n%s", text)
	}
	if got := testutil.ToFloat64(ScrapeFailures); got != before+1 {
		t.Fatalf("scrape failures %v, want %v", got, before+1)
	}
	g := &Gatherer{Own: own, URL: func() string { return "" }}
	if _, err := g.Gather(); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(ScrapeFailures); got != before+1 {
		t.Fatalf("no driver running counted as a failure: %v", got)
	}
}

func TestFromDriver(t *testing.T) {
	for name, want := range map[string]bool{
		"mcm_cloud_api_requests_total":                  true,
		"mcm_cloud_api_api_request_duration_seconds":    true,
		"machine_driver_connections_refused_total":      true,
		"mcm_cloud_api_driver_request_duration_seconds": false,
		"mcm_cloud_api_driver_requests_failed_total":    false,
		"process_resident_memory_bytes":                 false,
		"mcm_machine_items_total":                       false,
	} {
		if got := FromDriver(name); got != want {
			t.Errorf("FromDriver(%s) = %v, want %v", name, got, want)
		}
	}
}
