// Package prominfo exports what a cuecast client runs as one Prometheus
// series per config it watches, so that any series of the service can be
// joined to the version (and so the rollout cohort) its instance runs:
//
//	cuecast_config_info{config="payments/checkout", version="8", bucket="3",
//	    variant="", cuecast_instance="checkout-7f9c"} 1
//
// Register it on the registry the service already exposes:
//
//	prometheus.MustRegister(prominfo.New(c))
//
// and join with the scrape's own target labels:
//
//	sum(rate(http_errors_total[1m]) * on(instance) group_left
//	    cuecast_config_info{config="payments/checkout", version="8"})
//
// Why this shape: the series comes from the service's own registry, so it
// carries the same instance label as every other series of the scrape,
// and `on(instance) group_left` joins them. Joining on instance alone, not
// job, also serves the agent's copy (cuecast agent --metrics), scraped in
// a job of its own with the service's instance label (docs/ROLLOUT.md,
// "Joining the service's series to its version"). The instance ID is cuecast_instance, not instance, which the
// scrape owns (and would rename exported_instance). version is what the
// cohort and the baseline differ by, so a rollout's analysis selects a side
// with config and version alone; bucket lets a query group by cohort
// bucket, and variant names the dimension values of a variant path. A
// series is computed at each scrape from the client's watchers (Collect),
// so a version change replaces the series at the next scrape and no old
// version's series lingers. It lives outside package client so that a
// service's client does not depend on the Prometheus library unless it
// exports the series.
package prominfo

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cuecast/cuecast/client"
)

// Name is the series' metric name.
const Name = "cuecast_config_info"

var desc = prometheus.NewDesc(Name,
	"What this instance runs of each cuecast config it watches; always 1. Join on (instance).",
	[]string{"config", "version", "bucket", "variant", "cuecast_instance"}, nil)

// Source is what New reads at each scrape: a *client.Client, or anything
// listing the same.
type Source interface {
	Info() []client.Info
}

var _ Source = (*client.Client)(nil)

// Collector is a prometheus.Collector of the cuecast_config_info series of
// a Source.
type Collector struct{ src Source }

var _ prometheus.Collector = (*Collector)(nil)

// New returns a Collector of src's series.
func New(src Source) *Collector { return &Collector{src: src} }

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) { ch <- desc }

// Collect implements prometheus.Collector: one series per config src
// runs a version of.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, in := range c.src.Info() {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, 1,
			string(in.Config), strconv.FormatUint(in.Version, 10), strconv.Itoa(in.Bucket),
			in.Config.VariantLabel(), in.Instance)
	}
}
