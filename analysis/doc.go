// Package analysis judges a rollout stage on the service's own metrics,
// read from Prometheus: each cuecast.Metric of a stage's analysis is
// queried for the stage's cohort and for the baseline (the instances still
// on the version the rollout started from), and Judge compares the two.
//
//	p, err := analysis.New("http://prometheus:9090", analysis.Options{Timeout: 5 * time.Second})
//	res, err := p.Measure(ctx, m, "payments/checkout", 8, 7, time.Now())
//	v := analysis.Judge(m, res) // v.Outcome: Pass, Fail or Inconclusive
//
// Measure returns an error when Prometheus cannot be asked or refuses the
// query; a caller never counts that as a pass (the rollout controller
// waits, then halts after the metric's MaxErrors). Judge is pure: a
// function of the metric and the values measured. The services join their
// series to cohorts through the cuecast_config_info series their client
// exports (client/prominfo).
package analysis
