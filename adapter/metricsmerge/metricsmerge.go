// Package metricsmerge serves the machine-controller's own metrics and the
// supervised driver's on one endpoint, as Gardener scrapes them: port 10259
// of the provider container is the only place its allow-list keeps the
// mcm_cloud_api_* series from (deploy/gardener.md, "Metrics").
//
// The merge, per metric family name:
//
//   - every family of the controller's registry (MCM's machine, workqueue,
//     client and process metrics, and the driver request metrics the adapter
//     records around each call as MCM's Go providers do:
//     mcm_cloud_api_driver_request_duration_seconds and
//     mcm_cloud_api_driver_requests_failed_total);
//   - from the driver's /metrics, only the families it owns: the cloud API
//     series (mcm_cloud_api_requests_total, mcm_cloud_api_requests_failed_total,
//     mcm_cloud_api_api_request_duration_seconds: cloud calls happen in the
//     driver) and the driver's own machine_driver_* series. The driver's copy
//     of the mcm_cloud_api_driver_* families (it counts the same RPCs on its
//     side of the socket) is left out, so that each series is there once, as
//     MCM sees the call; so is any family name the controller already has.
//
// A driver that cannot be scraped (restarting) leaves its families out of
// that scrape and counts machine_controller_driver_metrics_scrape_failures_total.
package metricsmerge

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ScrapeFailures counts scrapes of the driver's metrics that failed.
var ScrapeFailures = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "machine_controller_driver_metrics_scrape_failures_total",
	Help: "Scrapes of the supervised machine driver's metrics that failed (the driver's series were left out of that scrape).",
})

// FromDriver tells whether a family of the driver's exposition is served.
func FromDriver(name string) bool {
	if strings.HasPrefix(name, "machine_driver_") {
		return true
	}
	return strings.HasPrefix(name, "mcm_cloud_api_") && !strings.HasPrefix(name, "mcm_cloud_api_driver_")
}

// Gatherer merges Own's families with the driver's, scraped from URL() on
// every Gather ("" skips the driver: none runs).
type Gatherer struct {
	Own    prometheus.Gatherer
	URL    func() string
	Client *http.Client
	// Timeout bounds one scrape of the driver (default 2s).
	Timeout time.Duration
}

// Gather implements prometheus.Gatherer.
func (g *Gatherer) Gather() ([]*dto.MetricFamily, error) {
	own, err := g.Own.Gather()
	if err != nil {
		return own, err
	}
	url := ""
	if g.URL != nil {
		url = g.URL()
	}
	if url == "" {
		return own, nil
	}
	driver, err := g.scrape(url)
	if err != nil {
		ScrapeFailures.Inc()
		return own, nil
	}
	return Merge(own, driver), nil
}

func (g *Gatherer) scrape(url string) (map[string]*dto.MetricFamily, error) {
	timeout := g.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	client := g.Client
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("driver metrics %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// Merge returns own plus the driver families FromDriver accepts whose names
// own lacks, sorted by name.
func Merge(own []*dto.MetricFamily, driver map[string]*dto.MetricFamily) []*dto.MetricFamily {
	have := make(map[string]bool, len(own))
	out := make([]*dto.MetricFamily, 0, len(own)+len(driver))
	for _, f := range own {
		have[f.GetName()] = true
		out = append(out, f)
	}
	for name, f := range driver {
		if FromDriver(name) && !have[name] && len(f.GetMetric()) > 0 {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out
}
